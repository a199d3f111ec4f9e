#include "formats/checkpoint/torch_checkpoint.h"

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/allocation_budget.h"
#include "formats/checkpoint/pickle.h"
#include "formats/checkpoint/zip_archive.h"
#include "formats/io/mapped_file.h"

namespace kiln {
namespace {

using pickle::Kind;
using pickle::Value;

// What TorchCheckpoint::source owns: the mapping and the copies of tensors that
// could not be used in place. The inner vectors' buffers never move.
struct Backing {
    std::shared_ptr<const MappedFile> mapping;
    std::vector<std::vector<std::byte>> copies;
};

// The legacy format starts with a protocol-2 pickle of a LONG1 magic number.
constexpr unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                          0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr unsigned char kZipMagic[] = {'P', 'K', 0x03, 0x04};

template <size_t N>
bool starts_with(std::span<const std::byte> bytes, const unsigned char (&magic)[N]) {
    return bytes.size() >= N && std::memcmp(bytes.data(), magic, N) == 0;
}

constexpr int kMaxDepth = 64;                    // nesting of dicts/lists in a checkpoint
// Values walked. A pickle that is a tree creates at most one value per byte;
// only memo references (BINGET) can make a value reachable twice, which is how
// a few hundred bytes could describe 2^40 leaves. So the walk may visit as many
// values as the pickle has bytes, plus a margin for legitimately shared ones.
constexpr size_t kExtraVisits = size_t{1} << 16;
constexpr size_t kMaxNameBytes = size_t{1} << 16;
// A joined name's node in the set of names, roughly.
constexpr uint64_t kNameEntryBytes = 64;
constexpr int64_t kMaxExpandedBytes = int64_t{1} << 28;  // a copied view larger than its storage

class Reader {
public:
    Reader(const ZipArchive& zip, std::string path, Backing& backing, uint64_t file_bytes)
        : zip_(zip), path_(std::move(path)), backing_(backing), budget_(file_bytes, "pytorch", path_) {}

    TorchCheckpoint read() {
        find_folder();
        check_byte_order();
        const std::span<const std::byte> data = zip_.checked_entry(folder_ + "/data.pkl");
        pickle_ = pickle::unpickle(data, path_, budget_);
        max_visits_ = data.size() + kExtraVisits;
        if (pickle_.root.kind != Kind::Dict)
            fail("pytorch", "{}: the checkpoint holds a {}, not a dict (a state dict or a training checkpoint)", path_,
                 pickle::kind_name(pickle_.root.kind));
        std::string name;
        walk(pickle_.root, name, 0);
        out_.path = path_;
        return std::move(out_);
    }

private:
    void find_folder() {
        for (const ZipEntry& e : zip_.entries()) {
            const std::string_view n = e.name;
            const size_t slash = n.find('/');
            if (slash == std::string_view::npos || n.substr(slash) != "/data.pkl") continue;
            if (!folder_.empty())
                fail("pytorch", "{}: the archive holds two pickles ('{}/data.pkl' and '{}'); torch.save writes one",
                     path_, printable(folder_), printable(n));
            folder_ = std::string(n.substr(0, slash));
        }
        if (folder_.empty())
            fail("pytorch", "{}: the zip archive has no <folder>/data.pkl entry, so torch.save did not write it", path_);
    }

    void check_byte_order() {
        if (zip_.find(folder_ + "/byteorder") == nullptr) return;  // torch < 2.1 wrote none: little-endian
        const auto b = zip_.entry(folder_ + "/byteorder");
        const std::string_view order(reinterpret_cast<const char*>(b.data()), b.size());
        if (order == "little") return;
        fail("pytorch", "{}: the checkpoint was saved with byte order '{}'; kiln reads little-endian checkpoints", path_,
             printable(order, 20));
    }

    // ---- walking the object
    void join(std::string& name, std::string_view part) const {
        // Real names are a few dozen bytes; one long memoised key repeated at
        // every level would otherwise grow the name by its length per level.
        if (name.size() + part.size() + 1 > kMaxNameBytes)
            fail("pytorch", "{}: a value's name, its keys joined with '.', is longer than {} bytes (it starts '{}')",
                 path_, kMaxNameBytes, printable(name.empty() ? part : std::string_view(name), 60));
        if (!name.empty()) name += '.';
        name += part;
    }

    void claim(const std::string& name) {
        budget_.charge(name.size() + kNameEntryBytes, "the checkpoint's names");
        if (!names_.insert(name).second)
            fail("pytorch", "{}: two values are both named '{}' once nested names are joined with '.'", path_,
                 printable(name));
    }

    void walk(Value v, std::string& name, int depth) {
        if (depth > kMaxDepth)
            fail("pytorch", "{}: '{}' is nested more than {} levels deep", path_, printable(name), kMaxDepth);
        if (++visits_ > max_visits_)
            fail("pytorch", "{}: the checkpoint expands to more than {} values (repeated shared references?)", path_,
                 max_visits_);
        const size_t restore = name.size();
        switch (v.kind) {
            case Kind::Dict:
                for (const auto& [key, value] : pickle_.dict(v)) {
                    if (key.kind == Kind::String) join(name, pickle_.string(key));
                    else if (key.kind == Kind::Int) join(name, std::to_string(key.integer));
                    else
                        fail("pytorch", "{}: a dict inside '{}' has a {} key; kiln names values by str or int keys",
                             path_, printable(name), pickle::kind_name(key.kind));
                    walk(value, name, depth + 1);
                    name.resize(restore);
                }
                return;
            case Kind::List:
            case Kind::Tuple: {
                const std::vector<Value>& items = pickle_.sequence(v);
                if (std::optional<GgufValue> array = scalar_array(items)) return add_value(name, std::move(*array));
                for (size_t i = 0; i < items.size(); ++i) {
                    join(name, std::to_string(i));
                    walk(items[i], name, depth + 1);
                    name.resize(restore);
                }
                return;
            }
            case Kind::Tensor: return add_tensor(name, pickle_.tensors[v.index]);
            case Kind::None:
            case Kind::BigInt: return;  // no GGUF value for them
            case Kind::Global: {
                const pickle::GlobalRef& g = pickle_.globals[v.index];
                if (g.kind == pickle::GlobalKind::DType) return add_value(name, GgufValue(g.name));
                fail("pytorch", "{}: '{}' is {}, a class or function, not data", path_, printable(name), g.name);
            }
            case Kind::Storage:
                fail("pytorch", "{}: '{}' is a bare storage, not a tensor", path_, printable(name));
            default: {
                std::optional<GgufValue> scalar = scalar_value(v);
                return add_value(name, std::move(*scalar));  // every remaining kind is a scalar
            }
        }
    }

    std::optional<GgufValue> scalar_value(Value v) {
        switch (v.kind) {
            case Kind::Int: return GgufValue(v.integer);
            case Kind::Float: return GgufValue(v.number);
            case Kind::Bool: return GgufValue(v.integer != 0);
            case Kind::String:
                budget_.charge(sizeof(GgufValue) + pickle_.string(v).size(), "the checkpoint's values");
                return GgufValue(pickle_.string(v));
            case Kind::Bytes: {
                budget_.charge(sizeof(GgufValue) * (1 + pickle_.string(v).size()), "the checkpoint's values");
                GgufArray bytes{GgufType::UINT8, {}};
                for (char c : pickle_.string(v)) bytes.items.emplace_back(static_cast<uint8_t>(c));
                return GgufValue(std::move(bytes));
            }
            default: return std::nullopt;
        }
    }

    // A list of only numbers, only bools or only strings, as one GGUF array.
    std::optional<GgufValue> scalar_array(const std::vector<Value>& items) {
        bool numbers = true, floats = false, bools = true, strings = true;
        for (const Value& item : items) {
            numbers = numbers && (item.kind == Kind::Int || item.kind == Kind::Float);
            floats = floats || item.kind == Kind::Float;
            bools = bools && item.kind == Kind::Bool;
            strings = strings && item.kind == Kind::String;
        }
        GgufArray array;
        if (numbers) array.element_type = floats ? GgufType::FLOAT64 : GgufType::INT64;
        else if (bools) array.element_type = GgufType::BOOL;
        else if (strings) array.element_type = GgufType::STRING;
        else return std::nullopt;
        // Strings are charged one by one (scalar_value); the array's slots here.
        budget_.charge(sizeof(GgufValue) * (1 + items.size()), "the checkpoint's values");
        for (const Value& item : items) {
            if (numbers && floats) array.items.emplace_back(item.kind == Kind::Float ? item.number
                                                                                     : static_cast<double>(item.integer));
            else array.items.push_back(*scalar_value(item));
        }
        return GgufValue(std::move(array));
    }

    void add_value(const std::string& name, GgufValue value) {
        claim(name);
        out_.values.push_back({name, std::move(value)});
    }

    // ---- tensors
    std::span<const std::byte> storage_bytes(const pickle::StorageRef& s, const std::string& tensor) {
        const auto it = storages_.find(s.key);
        if (it != storages_.end()) {
            if (it->second.dtype != s.dtype || it->second.numel != s.numel)
                fail("pytorch", "{}: storage '{}' is used as {} {} and as {} {} elements (tensor '{}')", path_,
                     printable(s.key), it->second.numel, pickle::torch_dtype_name(it->second.dtype), s.numel,
                     pickle::torch_dtype_name(s.dtype), printable(tensor));
            return it->second.bytes;
        }
        const std::string entry = folder_ + "/data/" + s.key;
        if (zip_.find(entry) == nullptr)
            fail("pytorch", "{}: tensor '{}' needs storage entry '{}', which the archive lacks", path_,
                 printable(tensor), printable(entry));
        const std::span<const std::byte> bytes = zip_.entry(entry);
        uint64_t expected = 0;
        if (__builtin_mul_overflow(static_cast<uint64_t>(s.numel), pickle::torch_dtype_size(s.dtype), &expected) ||
            bytes.size() != expected)
            fail("pytorch", "{}: storage '{}' has {} bytes but should hold {} {} elements", path_, printable(entry),
                 bytes.size(), s.numel, pickle::torch_dtype_name(s.dtype));
        storages_.emplace(s.key, StorageInfo{s.dtype, s.numel, bytes});
        return bytes;
    }

    void add_tensor(const std::string& name, const pickle::TensorRef& t) {
        const pickle::StorageRef& s = pickle_.storages[t.storage];
        TorchTensor out;
        switch (s.dtype) {
            case pickle::TorchDType::Float32: out.type = DType::F32; break;
            case pickle::TorchDType::Float16: out.type = DType::F16; break;
            case pickle::TorchDType::BFloat16: out.type = DType::BF16; break;
            default:
                fail("pytorch", "{}: tensor '{}' has dtype {}; kiln reads float32, float16 and bfloat16 tensors",
                     path_, printable(name), pickle::torch_dtype_name(s.dtype));
        }
        const std::span<const std::byte> storage = storage_bytes(s, name);
        const auto es = static_cast<int64_t>(pickle::torch_dtype_size(s.dtype));

        // Elements, and the last storage element the view touches, overflow-checked.
        int64_t count = 1, last = t.offset;
        bool overflow = false;
        for (size_t d = 0; d < t.size.size(); ++d) {
            int64_t reach = 0;
            overflow |= __builtin_mul_overflow(count, t.size[d], &count);
            if (t.size[d] > 0) overflow |= __builtin_mul_overflow(t.size[d] - 1, t.stride[d], &reach) ||
                                           __builtin_add_overflow(last, reach, &last);
        }
        int64_t total_bytes = 0;
        overflow |= __builtin_mul_overflow(count, es, &total_bytes);
        if (overflow)
            fail("pytorch", "{}: tensor '{}' (shape ({}), stride ({})) is too large", path_, printable(name),
                 fmt::join(t.size, ", "), fmt::join(t.stride, ", "));
        if (count > 0 && last >= s.numel)
            fail("pytorch",
                 "{}: tensor '{}' (offset {}, shape ({}), stride ({})) reaches element {} of a storage of {} elements",
                 path_, printable(name), t.offset, fmt::join(t.size, ", "), fmt::join(t.stride, ", "), last, s.numel);

        // torch's notion of contiguous: row-major strides, ignoring dims of size 1.
        bool contiguous = true;
        int64_t expected_stride = 1;
        for (size_t d = t.size.size(); count > 0 && d-- > 0;) {
            if (t.size[d] != 1 && t.stride[d] != expected_stride) contiguous = false;
            expected_stride *= t.size[d];  // a partial product of count: cannot overflow
        }

        budget_.charge(sizeof(TorchTensor) + name.size() + 2 * t.size.size() * sizeof(int64_t), "the checkpoint's tensors");
        if (count == 0) {
            out.data = {};
        } else if (contiguous) {
            out.data = storage.subspan(static_cast<size_t>(t.offset * es), static_cast<size_t>(total_bytes));
            // torch aligns storages to 64 bytes; a hand-made archive might not.
            if (reinterpret_cast<uintptr_t>(out.data.data()) % static_cast<uintptr_t>(es) != 0) {
                budget_.charge(static_cast<uint64_t>(total_bytes), "copies of unaligned tensors");
                out.data = keep(std::vector<std::byte>(out.data.begin(), out.data.end()));
            }
        } else {
            // A view of distinct elements is at most as big as its storage; only
            // an expand (stride 0) is bigger, and that is bounded so a tiny file
            // cannot demand a huge allocation.
            if (count > s.numel && total_bytes > kMaxExpandedBytes)
                fail("pytorch",
                     "{}: tensor '{}' (shape ({}), stride ({})) would expand a storage of {} elements to {} bytes "
                     "(kiln materializes at most {} bytes beyond a storage's size)",
                     path_, printable(name), fmt::join(t.size, ", "), fmt::join(t.stride, ", "), s.numel, total_bytes,
                     kMaxExpandedBytes);
            // One storage may be viewed by many tensors: each gathered copy is new memory.
            budget_.charge(static_cast<uint64_t>(total_bytes), "copies of strided tensor views");
            out.data = keep(gather(storage, t, count, es));
        }
        out.name = name;
        out.shape = t.size;
        out.storage = s.key;
        out.storage_offset = t.offset;
        out.stride = t.stride;
        claim(name);
        out_.tensors.push_back(std::move(out));
    }

    // A strided view copied into row-major order (bounds checked by the caller).
    static std::vector<std::byte> gather(std::span<const std::byte> storage, const pickle::TensorRef& t, int64_t count,
                                         int64_t es) {
        const size_t dims = t.size.size(), width = static_cast<size_t>(es);
        std::vector<std::byte> out(static_cast<size_t>(count) * width);
        std::vector<int64_t> index(dims, 0);
        int64_t src = t.offset;
        for (int64_t i = 0; i < count; ++i) {
            std::memcpy(out.data() + static_cast<size_t>(i) * width, storage.data() + static_cast<size_t>(src) * width,
                        width);
            for (size_t d = dims; d-- > 0;) {  // odometer step, last dim fastest
                src += t.stride[d];
                if (++index[d] < t.size[d]) break;
                src -= t.stride[d] * t.size[d];
                index[d] = 0;
            }
        }
        return out;
    }

    std::span<const std::byte> keep(std::vector<std::byte> bytes) {
        backing_.copies.push_back(std::move(bytes));
        return backing_.copies.back();
    }

    struct StorageInfo {
        pickle::TorchDType dtype;
        int64_t numel;
        std::span<const std::byte> bytes;
    };

    const ZipArchive& zip_;
    std::string path_;
    Backing& backing_;
    AllocationBudget budget_;
    std::string folder_;
    pickle::Pickle pickle_;
    std::unordered_map<std::string, StorageInfo> storages_;
    std::unordered_set<std::string> names_;
    size_t visits_ = 0, max_visits_ = 0;
    TorchCheckpoint out_;
};

TorchCheckpoint read_archive(std::span<const std::byte> bytes, std::string name,
                             std::shared_ptr<const MappedFile> mapping) {
    if (starts_with(bytes, kLegacyMagic))
        fail("pytorch",
             "{}: this is the legacy torch.save format (PyTorch < 1.6), which kiln does not read; load and save it "
             "again with a newer PyTorch",
             name);
    auto backing = std::make_shared<Backing>();
    backing->mapping = std::move(mapping);
    const ZipArchive zip = ZipArchive::parse(bytes, name);
    TorchCheckpoint out = Reader(zip, std::move(name), *backing, bytes.size()).read();
    out.source = std::move(backing);
    return out;
}

}  // namespace

const TorchTensor* TorchCheckpoint::find_tensor(std::string_view name) const noexcept {
    for (const TorchTensor& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

std::optional<std::string> find_state_dict_prefix(const TorchCheckpoint& checkpoint, std::string_view marker) {
    for (std::string_view outer : {"", "model.", "state_dict."}) {
        for (std::string_view compiled : {"", "_orig_mod."}) {
            std::string prefix = std::string(outer) + std::string(compiled);
            if (checkpoint.find_tensor(prefix + std::string(marker)) != nullptr) return prefix;
        }
    }
    return std::nullopt;
}

const GgufValue* TorchCheckpoint::find_value(std::string_view name) const noexcept {
    for (const GgufEntry& e : values)
        if (e.key == name) return &e.value;
    return nullptr;
}

TorchCheckpoint read_torch_checkpoint(const std::filesystem::path& path) {
    auto mapping = std::make_shared<const MappedFile>(path);
    const std::span<const std::byte> bytes = mapping->bytes();
    return read_archive(bytes, path.string(), std::move(mapping));
}

TorchCheckpoint parse_torch_checkpoint(std::span<const std::byte> bytes, std::string name) {
    return read_archive(bytes, std::move(name), nullptr);
}

bool looks_like_torch_checkpoint(std::span<const std::byte> head) noexcept {
    return starts_with(head, kZipMagic) || starts_with(head, kLegacyMagic);
}

}  // namespace kiln
