#pragma once
// The ZIP format's record signatures and markers (APPNOTE.TXT), shared by the
// reader (zip_archive) and the writer (zip_writer) so the two spell them once.
#include <cstddef>
#include <cstdint>

namespace kiln::zip {

inline constexpr uint32_t kLocalHeaderSig = 0x04034b50;    // "PK\3\4"
inline constexpr uint32_t kCentralHeaderSig = 0x02014b50;  // "PK\1\2"
inline constexpr uint32_t kEocdSig = 0x06054b50;           // "PK\5\6"
inline constexpr uint32_t kZip64EocdSig = 0x06064b50;      // "PK\6\6"
inline constexpr uint32_t kZip64LocatorSig = 0x07064b50;   // "PK\6\7"
inline constexpr size_t kLocalHeaderBytes = 30;
inline constexpr uint16_t kZip64ExtraId = 0x0001;
inline constexpr uint32_t k32Sentinel = 0xffffffffu;  // "the real value is in the zip64 extra field"
inline constexpr uint16_t k16Sentinel = 0xffffu;

}  // namespace kiln::zip
