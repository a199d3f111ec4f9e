#include "formats/checkpoint/zip_writer.h"

#include <limits>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/zip_archive.h"
#include "formats/checkpoint/zip_format.h"
#include "formats/io/atomic_file.h"

namespace kiln {
namespace {

using namespace zip;

// An extra field of zeros that only moves the data to its alignment; readers
// skip ids they do not know. ("kl": kiln; torch uses its own id the same way.)
constexpr uint16_t kPaddingExtraId = 0x6c6b;
constexpr uint16_t kVersionPlain = 20;  // 2.0: stored entries in folders
constexpr uint16_t kVersionZip64 = 45;  // 4.5: zip64 extensions
// 1980-01-01 00:00 in MS-DOS form: a fixed time, so that the same model gives the same bytes.
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;

// Little-endian fields appended to a header under construction.
class Bytes {
public:
    template <typename T>
    Bytes& put(T value) {
        for (size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xffu));
        return *this;
    }
    Bytes& put(std::string_view text) {
        for (char c : text) bytes_.push_back(static_cast<std::byte>(c));
        return *this;
    }
    Bytes& zeros(size_t n) {
        bytes_.insert(bytes_.end(), n, std::byte{0});
        return *this;
    }
    std::span<const std::byte> span() const noexcept { return bytes_; }
    size_t size() const noexcept { return bytes_.size(); }

private:
    std::vector<std::byte> bytes_;
};

bool fits32(uint64_t v) { return v < k32Sentinel; }

}  // namespace

ZipWriter::ZipWriter(AtomicFile& out, bool force_zip64) : out_(out), force_zip64_(force_zip64) {}

void ZipWriter::add(std::string_view name, std::span<const std::byte> data) {
    if (finished_) fail("zip", "cannot add entry '{}': the archive is already finished", printable(name));
    if (name.empty() || name.size() >= k16Sentinel || name.front() == '/' || name.find('\\') != std::string_view::npos)
        fail("zip", "cannot add entry '{}': not a relative '/'-separated name under 64 KiB", printable(name));
    for (const Entry& e : entries_)
        if (e.name == name) fail("zip", "cannot add entry '{}' twice", printable(name));

    Entry e{std::string(name), zip_crc32(data), data.size(), out_.bytes_written()};
    const bool zip64 = force_zip64_ || !fits32(e.size);
    const uint64_t zip64_extra = zip64 ? 4 + 16 : 0;
    // Padding so that the data starts on a kAlignment boundary; a padding
    // record needs at least its own 4-byte header.
    uint64_t padding = (kAlignment - (e.header_offset + kLocalHeaderBytes + name.size() + zip64_extra) % kAlignment) %
                       kAlignment;
    if (padding != 0 && padding < 4) padding += kAlignment;

    Bytes h;
    h.put(kLocalHeaderSig).put(zip64 ? kVersionZip64 : kVersionPlain).put(uint16_t{0}).put(uint16_t{0});
    h.put(kDosTime).put(kDosDate).put(e.crc32);
    const uint32_t size32 = zip64 ? k32Sentinel : static_cast<uint32_t>(e.size);
    h.put(size32).put(size32);  // compressed = uncompressed: stored
    h.put(static_cast<uint16_t>(name.size())).put(static_cast<uint16_t>(zip64_extra + padding));
    h.put(name);
    if (zip64) h.put(kZip64ExtraId).put(uint16_t{16}).put(e.size).put(e.size);  // the local form holds both sizes
    if (padding != 0) h.put(kPaddingExtraId).put(static_cast<uint16_t>(padding - 4)).zeros(padding - 4);
    out_.write(h.span());
    out_.write(data);
    entries_.push_back(std::move(e));
}

void ZipWriter::finish() {
    if (finished_) fail("zip", "the archive is already finished");
    finished_ = true;
    const uint64_t cd_offset = out_.bytes_written();
    for (const Entry& e : entries_) {
        // The central form of the zip64 field holds only the values whose 32-bit field is the sentinel, in order.
        const bool big_size = force_zip64_ || !fits32(e.size);
        const bool big_offset = force_zip64_ || !fits32(e.header_offset);
        Bytes extra;
        if (big_size) extra.put(e.size).put(e.size);
        if (big_offset) extra.put(e.header_offset);
        const bool zip64 = extra.size() != 0;
        Bytes h;
        h.put(kCentralHeaderSig).put(zip64 ? kVersionZip64 : kVersionPlain).put(zip64 ? kVersionZip64 : kVersionPlain);
        h.put(uint16_t{0}).put(uint16_t{0}).put(kDosTime).put(kDosDate).put(e.crc32);
        const uint32_t size32 = big_size ? k32Sentinel : static_cast<uint32_t>(e.size);
        h.put(size32).put(size32);
        h.put(static_cast<uint16_t>(e.name.size())).put(static_cast<uint16_t>(zip64 ? 4 + extra.size() : 0));
        h.put(uint16_t{0}).put(uint16_t{0}).put(uint16_t{0}).put(uint32_t{0});  // comment, disk, attributes
        h.put(big_offset ? k32Sentinel : static_cast<uint32_t>(e.header_offset));
        h.put(std::string_view(e.name));
        if (zip64) {
            h.put(kZip64ExtraId).put(static_cast<uint16_t>(extra.size()));
            out_.write(h.span());
            out_.write(extra.span());
        } else {
            out_.write(h.span());
        }
    }
    const uint64_t cd_end = out_.bytes_written();
    const uint64_t cd_size = cd_end - cd_offset;
    const uint64_t count = entries_.size();
    const bool zip64 = force_zip64_ || !fits32(cd_offset) || !fits32(cd_size) || count >= k16Sentinel;
    if (zip64) {
        Bytes r;
        r.put(kZip64EocdSig).put(uint64_t{44}).put(kVersionZip64).put(kVersionZip64);
        r.put(uint32_t{0}).put(uint32_t{0}).put(count).put(count).put(cd_size).put(cd_offset);
        r.put(kZip64LocatorSig).put(uint32_t{0}).put(cd_end).put(uint32_t{1});
        out_.write(r.span());
    }
    Bytes eocd;
    const uint16_t count16 = zip64 ? k16Sentinel : static_cast<uint16_t>(count);
    eocd.put(kEocdSig).put(uint16_t{0}).put(uint16_t{0}).put(count16).put(count16);
    eocd.put(zip64 ? k32Sentinel : static_cast<uint32_t>(cd_size));
    eocd.put(zip64 ? k32Sentinel : static_cast<uint32_t>(cd_offset));
    eocd.put(uint16_t{0});
    out_.write(eocd.span());
}

}  // namespace kiln
