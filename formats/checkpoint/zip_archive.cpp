#include "formats/checkpoint/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/zip_format.h"
#include "formats/io/crc32.h"
#include "formats/io/mapped_file.h"

namespace kiln {
namespace {

using namespace zip;

constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kEocdBytes = 22;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kZip64EocdBytes = 56;
constexpr size_t kMaxCommentBytes = 0xffff;

// Little-endian reads at an offset the caller has already bounds-checked.
template <typename T>
T load(std::span<const std::byte> bytes, uint64_t at) {
    T value;
    std::memcpy(&value, bytes.data() + at, sizeof(T));
    return value;
}

std::string method_name(uint16_t method) {
    switch (method) {
        case 8: return "deflate";
        case 9: return "deflate64";
        case 12: return "bzip2";
        case 14: return "lzma";
        case 93: return "zstd";
        case 95: return "xz";
        default: return fmt::format("method {}", method);
    }
}

// Why a name could not be a path inside the archive folder; empty when it can.
std::string_view unsafe_name_reason(std::string_view name) {
    if (name.empty()) return "is empty";
    if (name.find('\0') != std::string_view::npos) return "contains a NUL byte";
    if (name.find('\\') != std::string_view::npos || name.front() == '/') return "points outside the archive";
    if (name.size() >= 2 && name[1] == ':') return "points outside the archive";  // a drive letter
    size_t start = 0;
    while (start <= name.size()) {
        const size_t end = std::min(name.find('/', start), name.size());
        if (name.substr(start, end - start) == "..") return "points outside the archive";
        start = end + 1;
    }
    return {};
}

struct Zip64Fields {
    uint64_t size, compressed_size, header_offset;
};

}  // namespace

uint32_t zip_crc32(std::span<const std::byte> data) noexcept { return crc32(data); }

ZipArchive ZipArchive::open(const std::filesystem::path& path) {
    ZipArchive z;
    auto mapping = std::make_shared<const MappedFile>(path);
    z.bytes_ = mapping->bytes();
    z.mapping_ = std::move(mapping);
    z.name_ = path.string();
    z.index();
    return z;
}

ZipArchive ZipArchive::parse(std::span<const std::byte> bytes, std::string name) {
    ZipArchive z;
    z.bytes_ = bytes;
    z.name_ = std::move(name);
    z.index();
    return z;
}

const ZipEntry* ZipArchive::find(std::string_view entry_name) const noexcept {
    const auto it = by_name_.find(std::string(entry_name));
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> ZipArchive::entry(std::string_view entry_name) const {
    const ZipEntry* e = find(entry_name);
    if (e == nullptr) fail("zip", "{}: the archive has no entry '{}'", name_, printable(entry_name));
    if (e->method != 0)
        fail("zip", "{}: entry '{}' is compressed ({}); kiln reads only stored entries, as torch.save writes them",
             name_, printable(e->name), method_name(e->method));
    return bytes_.subspan(e->data_offset, e->size);
}

std::span<const std::byte> ZipArchive::checked_entry(std::string_view entry_name) const {
    const std::span<const std::byte> data = entry(entry_name);
    const ZipEntry& e = *find(entry_name);
    const uint32_t crc = zip_crc32(data);
    if (crc != e.crc32)
        fail("zip", "{}: entry '{}' is corrupt (CRC-32 {:08x}, the central directory says {:08x})", name_,
             printable(e.name), crc, e.crc32);
    return data;
}

void ZipArchive::index() {
    const uint64_t size = bytes_.size();
    if (size == 0) fail("zip", "{}: the file is empty", name_);

    // Find the EOCD: the last signature whose comment ends exactly at the end
    // of the file (a signature inside a comment or inside data does not).
    uint64_t eocd = UINT64_MAX;
    if (size >= kEocdBytes) {
        const uint64_t lowest = size - kEocdBytes - std::min<uint64_t>(size - kEocdBytes, kMaxCommentBytes);
        for (uint64_t at = size - kEocdBytes + 1; at-- > lowest;) {
            if (load<uint32_t>(bytes_, at) == kEocdSig && at + kEocdBytes + load<uint16_t>(bytes_, at + 20) == size) {
                eocd = at;
                break;
            }
        }
    }
    if (eocd == UINT64_MAX) {
        if (size >= 4 && load<uint32_t>(bytes_, 0) == kLocalHeaderSig)
            fail("zip", "{}: the zip archive's end-of-central-directory record is missing ({} bytes; a truncated file?)",
                 name_, size);
        fail("zip", "{}: not a zip archive (no end-of-central-directory record in its {} bytes)", name_, size);
    }

    const uint16_t disk = load<uint16_t>(bytes_, eocd + 4);
    const uint16_t cd_disk = load<uint16_t>(bytes_, eocd + 6);
    uint64_t disk_entries = load<uint16_t>(bytes_, eocd + 8);
    uint64_t count = load<uint16_t>(bytes_, eocd + 10);
    uint64_t cd_size = load<uint32_t>(bytes_, eocd + 12);
    uint64_t cd_offset = load<uint32_t>(bytes_, eocd + 16);
    uint64_t cd_limit = eocd;  // the central directory must end before this

    // The zip64 locator sits immediately before the EOCD when there is one.
    if (eocd >= kZip64LocatorBytes && load<uint32_t>(bytes_, eocd - kZip64LocatorBytes) == kZip64LocatorSig) {
        const uint64_t locator = eocd - kZip64LocatorBytes;
        const uint64_t record = load<uint64_t>(bytes_, locator + 8);
        if (load<uint32_t>(bytes_, locator + 4) != 0 || load<uint32_t>(bytes_, locator + 16) > 1)
            fail("zip", "{}: multi-disk (split) zip archives are not supported", name_);
        if (record > locator || locator - record < kZip64EocdBytes)
            fail("zip", "{}: the zip64 end-of-central-directory record at byte {} does not fit before its locator at {}",
                 name_, record, locator);
        if (load<uint32_t>(bytes_, record) != kZip64EocdSig)
            fail("zip", "{}: no zip64 end-of-central-directory record at byte {} where the locator points", name_,
                 record);
        if (load<uint32_t>(bytes_, record + 16) != 0 || load<uint32_t>(bytes_, record + 20) != 0)
            fail("zip", "{}: multi-disk (split) zip archives are not supported", name_);
        disk_entries = load<uint64_t>(bytes_, record + 24);
        count = load<uint64_t>(bytes_, record + 32);
        cd_size = load<uint64_t>(bytes_, record + 40);
        cd_offset = load<uint64_t>(bytes_, record + 48);
        cd_limit = record;
    } else if (disk != 0 || cd_disk != 0) {
        fail("zip", "{}: multi-disk (split) zip archives are not supported", name_);
    } else if (count == k16Sentinel || cd_size == k32Sentinel || cd_offset == k32Sentinel) {
        fail("zip", "{}: the archive needs a zip64 end-of-central-directory record but has none", name_);
    }
    if (disk_entries != count) fail("zip", "{}: multi-disk (split) zip archives are not supported", name_);
    if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset)
        fail("zip", "{}: the central directory (byte {}, {} bytes) runs past byte {} where it must end", name_,
             cd_offset, cd_size, cd_limit);
    if (count > cd_size / kCentralHeaderBytes)
        fail("zip", "{}: the archive claims {} entries, which cannot fit in a central directory of {} bytes", name_,
             count, cd_size);

    entries_.reserve(count);
    uint64_t at = cd_offset;
    const uint64_t cd_end = cd_offset + cd_size;
    for (uint64_t i = 0; i < count; ++i) {
        if (cd_end - at < kCentralHeaderBytes || load<uint32_t>(bytes_, at) != kCentralHeaderSig)
            fail("zip", "{}: central directory entry {} at byte {} is malformed (no header signature)", name_, i, at);
        const uint16_t flags = load<uint16_t>(bytes_, at + 8);
        ZipEntry e;
        e.method = load<uint16_t>(bytes_, at + 10);
        e.crc32 = load<uint32_t>(bytes_, at + 16);
        e.compressed_size = load<uint32_t>(bytes_, at + 20);
        e.size = load<uint32_t>(bytes_, at + 24);
        const uint64_t name_len = load<uint16_t>(bytes_, at + 28);
        const uint64_t extra_len = load<uint16_t>(bytes_, at + 30);
        const uint64_t comment_len = load<uint16_t>(bytes_, at + 32);
        const uint16_t start_disk = load<uint16_t>(bytes_, at + 34);
        e.header_offset = load<uint32_t>(bytes_, at + 42);
        if (cd_end - at - kCentralHeaderBytes < name_len + extra_len + comment_len)
            fail("zip", "{}: central directory entry {} at byte {} runs past the end of the central directory", name_,
                 i, at);
        const uint64_t name_at = at + kCentralHeaderBytes;
        e.name.assign(reinterpret_cast<const char*>(bytes_.data() + name_at), name_len);

        // zip64 extra field: 64-bit values for exactly those fields that hold
        // the 32-bit sentinel, in the order size, compressed size, offset.
        const bool need64 = e.size == k32Sentinel || e.compressed_size == k32Sentinel || e.header_offset == k32Sentinel;
        bool have64 = false;
        for (uint64_t x = name_at + name_len, x_end = x + extra_len; x < x_end;) {
            if (x_end - x < 4) fail("zip", "{}: entry '{}' has a malformed extra field", name_, printable(e.name));
            const uint16_t id = load<uint16_t>(bytes_, x);
            const uint64_t len = load<uint16_t>(bytes_, x + 2);
            if (x_end - x - 4 < len) fail("zip", "{}: entry '{}' has a malformed extra field", name_, printable(e.name));
            if (id == kZip64ExtraId) {
                uint64_t field = x + 4;
                const uint64_t field_end = field + len;
                for (uint64_t* value : {&e.size, &e.compressed_size, &e.header_offset}) {
                    if (*value != k32Sentinel) continue;
                    if (field_end - field < 8)
                        fail("zip", "{}: entry '{}' has a zip64 extra field too short for its sizes", name_,
                             printable(e.name));
                    *value = load<uint64_t>(bytes_, field);
                    field += 8;
                }
                have64 = true;
            }
            x += 4 + len;
        }
        if (need64 && !have64)
            fail("zip", "{}: entry '{}' needs a zip64 extra field but has none", name_, printable(e.name));
        if (start_disk != 0 && !(start_disk == k16Sentinel && have64))
            fail("zip", "{}: multi-disk (split) zip archives are not supported", name_);

        if (const std::string_view why = unsafe_name_reason(e.name); !why.empty())
            fail("zip", "{}: entry '{}' {}", name_, printable(e.name), why);
        if ((flags & 0x1u) != 0) fail("zip", "{}: entry '{}' is encrypted", name_, printable(e.name));
        if (e.method == 0 && e.compressed_size != e.size)
            fail("zip", "{}: stored entry '{}' has {} bytes in the archive but claims {} bytes of data", name_,
                 printable(e.name), e.compressed_size, e.size);

        // The local header: only its name and extra lengths matter (it may
        // carry zero sizes, see flag bit 3), but it must agree on the name.
        const uint64_t h = e.header_offset;
        if (h > cd_offset || cd_offset - h < kLocalHeaderBytes || load<uint32_t>(bytes_, h) != kLocalHeaderSig)
            fail("zip", "{}: entry '{}' has no local header at byte {}", name_, printable(e.name), h);
        const uint64_t local_name_len = load<uint16_t>(bytes_, h + 26);
        const uint64_t local_extra_len = load<uint16_t>(bytes_, h + 28);
        e.data_offset = h + kLocalHeaderBytes + local_name_len + local_extra_len;
        if (e.data_offset > cd_offset ||
            local_name_len != name_len ||
            std::memcmp(bytes_.data() + h + kLocalHeaderBytes, e.name.data(), name_len) != 0)
            fail("zip", "{}: the local header of entry '{}' at byte {} does not match the central directory", name_,
                 printable(e.name), h);
        if (load<uint16_t>(bytes_, h + 8) != e.method)
            fail("zip", "{}: the local header of entry '{}' gives a different compression method", name_,
                 printable(e.name));
        if (e.compressed_size > cd_offset - e.data_offset)
            fail("zip", "{}: entry '{}' ({} bytes from byte {}) runs into the central directory at byte {}", name_,
                 printable(e.name), e.compressed_size, e.data_offset, cd_offset);

        if (!by_name_.emplace(e.name, entries_.size()).second)
            fail("zip", "{}: entry '{}' appears twice in the archive", name_, printable(e.name));
        entries_.push_back(std::move(e));
        at = name_at + name_len + extra_len + comment_len;
    }
}

}  // namespace kiln
