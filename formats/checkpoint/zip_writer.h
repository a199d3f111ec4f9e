#pragma once
// Writing zip archives the way torch.save lays them out, so that PyTorch's own
// reader (and kiln's, formats/checkpoint/zip_archive.h) can map the data:
// every entry is stored (never compressed), its data starts on a 64-byte
// boundary (padding goes into the local header's extra field), and the CRC-32
// and sizes are written in the local header itself (no data descriptors,
// since the whole entry is known before it is written).
//
// ZIP64 (PKWARE's APPNOTE.TXT, 4.5.3 and 4.3.14): an entry of 4 GiB or more,
// an entry that starts past 4 GiB, or an archive whose central directory lies
// past 4 GiB or holds 65535 entries or more gets the zip64 extra fields and the
// zip64 end-of-central-directory record with its locator; smaller archives are
// plain zip. `force_zip64` writes the zip64 forms for every entry (so tests can
// check them without writing 4 GiB).
//
// The archive goes to an AtomicFile: the caller commits it once finish()
// returned, and an error anywhere leaves no file behind.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class AtomicFile;

class ZipWriter {
public:
    static constexpr uint64_t kAlignment = 64;  // torch's record alignment

    explicit ZipWriter(AtomicFile& out, bool force_zip64 = false);

    // Appends one stored entry. Names must be unique, relative, '/'-separated,
    // and under 64 KiB; `data` may be any size.
    void add(std::string_view name, std::span<const std::byte> data);
    // Writes the central directory and the end records. Nothing may be added after.
    void finish();

private:
    struct Entry {
        std::string name;
        uint32_t crc32 = 0;
        uint64_t size = 0;
        uint64_t header_offset = 0;
    };

    AtomicFile& out_;
    bool force_zip64_;
    bool finished_ = false;
    std::vector<Entry> entries_;
};

}  // namespace kiln
