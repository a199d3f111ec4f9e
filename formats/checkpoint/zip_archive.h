#pragma once
// Reading the zip archives that torch.save writes, straight from a memory
// mapping. torch.save never compresses (so tensor data can be mapped, not
// copied) and aligns each entry's data to 64 bytes with padding in the local
// header's extra field; it always writes a zip64 end-of-central-directory
// record and locator, and it sets general-purpose flag bit 3 (sizes follow the
// data in a "data descriptor"), so the local headers' own sizes are zero and
// only the central directory's sizes can be trusted.
//
// What is read (the layout from PKWARE's APPNOTE.TXT):
//   end of central directory (EOCD), found by scanning back from the end for
//     its signature with a comment that ends exactly at the end of the file;
//   the zip64 EOCD locator (20 bytes just before the EOCD) and the zip64 EOCD
//     record it points at, whose 64-bit counts/offsets win when present;
//   one central-directory header per entry (with zip64 extra fields where a
//     32-bit field holds 0xFFFFFFFF);
//   each entry's local header, only to find where its data starts.
// Every offset and size is checked against the file before use, so a
// truncated or corrupt archive gives a kiln::Error("zip", "<file>: ...") and
// never a read outside the mapping. Entry names that could point outside an
// extraction folder ("..", absolute paths, backslashes) and duplicate names are
// refused outright: kiln never extracts, but such an archive is not one
// torch.save wrote, and refusing it keeps lookups unambiguous.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

class MappedFile;

struct ZipEntry {
    std::string name;
    uint16_t method = 0;           // 0 = stored; anything else is compressed
    uint32_t crc32 = 0;            // of the uncompressed data, from the central directory
    uint64_t compressed_size = 0;  // bytes in the archive
    uint64_t size = 0;             // bytes once uncompressed
    uint64_t header_offset = 0;    // of the local header
    uint64_t data_offset = 0;      // of the entry's first data byte
};

class ZipArchive {
public:
    ZipArchive(ZipArchive&&) noexcept = default;
    ZipArchive& operator=(ZipArchive&&) noexcept = default;
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;

    // Maps and indexes a file. Throws kiln::Error on any problem.
    static ZipArchive open(const std::filesystem::path& path);
    // Indexes bytes owned by the caller (they must outlive the result); `name`
    // is used in error messages.
    static ZipArchive parse(std::span<const std::byte> bytes, std::string name);

    const std::string& name() const noexcept { return name_; }
    std::span<const std::byte> bytes() const noexcept { return bytes_; }
    const std::vector<ZipEntry>& entries() const noexcept { return entries_; }
    const ZipEntry* find(std::string_view entry_name) const noexcept;

    // The data of a stored entry, zero-copy inside the archive's bytes. Throws
    // when the entry is missing or compressed (naming it and the method).
    std::span<const std::byte> entry(std::string_view entry_name) const;
    // entry(), plus a CRC-32 check of the data against the central directory.
    // Costs one pass over the bytes: meant for small entries such as data.pkl.
    std::span<const std::byte> checked_entry(std::string_view entry_name) const;

    // The mapping, when open() made one (null after parse()).
    const std::shared_ptr<const MappedFile>& mapping() const noexcept { return mapping_; }

private:
    ZipArchive() = default;
    void index();

    std::shared_ptr<const MappedFile> mapping_;
    std::span<const std::byte> bytes_;
    std::string name_;
    std::vector<ZipEntry> entries_;
    std::unordered_map<std::string, size_t> by_name_;
};

// The CRC-32 that zip uses (IEEE 802.3 polynomial, reflected, inverted).
uint32_t zip_crc32(std::span<const std::byte> data) noexcept;

}  // namespace kiln
