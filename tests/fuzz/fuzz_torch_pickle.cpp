// libFuzzer entry for the whitelist unpickler and the torch.save walk
// (formats/checkpoint/pickle.h, torch_checkpoint.h): the input is a data.pkl.
// It is read as a file of its own first (a raw pickle is the legacy torch.save
// format, which must be refused cleanly), then stored in a zip archive the way
// torch.save lays one out, with a storage entry of exactly the size each
// persistent id asks for (up to a budget), so mutations of the pickle reach
// the tensor views and the state-dict readers instead of stopping at a missing
// entry. Anything but a result or kiln::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/checkpoint/pickle.h"
#include "formats/checkpoint/zip_archive.h"
#include "fuzz_torch_models.h"

namespace {

constexpr uint64_t kStorageBudget = uint64_t{4} << 20;  // bytes of storage entries per input, all together
constexpr size_t kMaxStorages = 4096;                    // entries (a zip without zip64 holds 65535)
constexpr const char* kFolder = "fuzz";

// A stored (uncompressed) zip archive, each entry's data aligned to 64 bytes
// as torch.save aligns them (padding in the local header's extra field).
class ZipWriter {
public:
    void add(const std::string& name, std::span<const std::byte> data) {
        const size_t unpadded = out_.size() + 30 + name.size() + 4;
        const uint16_t extra = static_cast<uint16_t>(4 + (64 - unpadded % 64) % 64);
        const uint32_t offset = static_cast<uint32_t>(out_.size());
        const uint32_t crc = kiln::zip_crc32(data);
        const uint32_t n = static_cast<uint32_t>(data.size());
        put32(out_, 0x04034b50);
        put16(out_, 20), put16(out_, 0), put16(out_, 0), put16(out_, 0), put16(out_, 0x21);  // version, flags, method, time, date
        put32(out_, crc), put32(out_, n), put32(out_, n);
        put16(out_, static_cast<uint16_t>(name.size())), put16(out_, extra);
        append(out_, name);
        put16(out_, 0x4246), put16(out_, static_cast<uint16_t>(extra - 4));  // torch.save's "FB" padding field
        out_.resize(out_.size() + extra - 4, std::byte{0});
        out_.insert(out_.end(), data.begin(), data.end());

        put32(central_, 0x02014b50);
        put16(central_, 20), put16(central_, 20), put16(central_, 0), put16(central_, 0), put16(central_, 0), put16(central_, 0x21);
        put32(central_, crc), put32(central_, n), put32(central_, n);
        put16(central_, static_cast<uint16_t>(name.size())), put16(central_, 0), put16(central_, 0);  // name, extra, comment
        put16(central_, 0), put16(central_, 0), put32(central_, 0), put32(central_, offset);  // disk, attributes, offset
        append(central_, name);
        ++count_;
    }

    std::vector<std::byte> finish() {
        const uint32_t at = static_cast<uint32_t>(out_.size());
        out_.insert(out_.end(), central_.begin(), central_.end());
        put32(out_, 0x06054b50);
        put16(out_, 0), put16(out_, 0), put16(out_, count_), put16(out_, count_);
        put32(out_, static_cast<uint32_t>(central_.size())), put32(out_, at), put16(out_, 0);
        return std::move(out_);
    }

private:
    static void put16(std::vector<std::byte>& v, uint16_t x) {
        for (int i = 0; i < 2; ++i) v.push_back(static_cast<std::byte>(x >> (8 * i)));
    }
    static void put32(std::vector<std::byte>& v, uint32_t x) {
        for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::byte>(x >> (8 * i)));
    }
    static void append(std::vector<std::byte>& v, const std::string& s) {
        for (char c : s) v.push_back(static_cast<std::byte>(c));
    }

    std::vector<std::byte> out_, central_;
    uint16_t count_ = 0;
};

// A key that makes a valid entry name below <folder>/data/ (others are left
// out: the walk then reports the missing entry).
bool usable_key(const std::string& key) {
    return !key.empty() && key.size() < 200 && key != "." && key != ".." &&
           key.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> pickled(reinterpret_cast<const std::byte*>(data), size);
    try {
        kiln::fuzz::convert_torch_models(kiln::parse_torch_checkpoint(pickled, "fuzz.pt"));
    } catch (const kiln::Error&) {
        // the expected outcome: a raw pickle is not a torch.save archive
    }

    kiln::pickle::Pickle p;
    try {
        p = kiln::pickle::unpickle(pickled, "fuzz/data.pkl");
    } catch (const kiln::Error&) {
        return 0;  // the expected outcome for a malformed or hostile pickle
    }
    // Storage sizes as the persistent ids give them; an impossible size gets an empty entry.
    std::map<std::string, uint64_t> storage_bytes;
    uint64_t budget = kStorageBudget;
    for (const kiln::pickle::StorageRef& s : p.storages) {
        if (storage_bytes.size() == kMaxStorages) break;
        if (!usable_key(s.key) || storage_bytes.contains(s.key)) continue;
        uint64_t n = 0;
        if (s.numel < 0 || __builtin_mul_overflow(static_cast<uint64_t>(s.numel), kiln::pickle::torch_dtype_size(s.dtype), &n) ||
            n > budget)
            n = 0;
        budget -= n;
        storage_bytes.emplace(s.key, n);
    }
    ZipWriter zip;
    zip.add(std::string(kFolder) + "/data.pkl", pickled);
    std::vector<std::byte> storage;
    for (const auto& [key, n] : storage_bytes) {
        // Small repeating values (0.25 as float32, 1.0 as float16 and bfloat16 pairs) rather than zeros.
        storage.assign(n, std::byte{0});
        for (uint64_t i = 0; i + 4 <= n; i += 4) std::memcpy(storage.data() + i, "\x00\x3c\x80\x3e", 4);
        zip.add(std::string(kFolder) + "/data/" + key, storage);
    }
    const std::string version = "3\n";
    zip.add(std::string(kFolder) + "/version", std::as_bytes(std::span(version.data(), version.size())));
    const std::vector<std::byte> archive = zip.finish();
    try {
        kiln::fuzz::convert_torch_models(kiln::parse_torch_checkpoint(archive, "fuzz.pt"));
    } catch (const kiln::Error&) {
        // the expected outcome for a checkpoint kiln cannot read
    }
    return 0;
}
