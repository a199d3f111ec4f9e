#include "formats/gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/not_gguf.h"
#include "formats/io/mapped_file.h"
#include "formats/gguf/gguf_checksum.h"

namespace kiln {

namespace {

// Arrays may nest; real files nest at most once. The limit keeps a hostile file
// from recursing the parser off its stack.
constexpr int kMaxArrayDepth = 16;

// Counts are validated against the bytes left, but a large file could still make a
// corrupt count reserve gigabytes; vectors beyond this grow as elements really parse.
constexpr uint64_t kMaxReserve = 1 << 16;

constexpr uint64_t kScalarSize[kGgufTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// The fewest bytes one encoded value of `type` can take: used to reject counts
// that cannot possibly fit in what is left of the file before allocating anything.
uint64_t min_encoded_size(GgufType type) {
    switch (type) {
        case GgufType::STRING: return 8;        // u64 length
        case GgufType::ARRAY: return 4 + 8;     // element type + count
        default: return kScalarSize[static_cast<uint32_t>(type)];
    }
}

}  // namespace

class GgufParser {
public:
    GgufParser(GgufFile& file) : file_(file), bytes_(file.bytes_) {}

    void parse() {
        if (bytes_.empty()) error_at(0, "the file is empty (expected a GGUF header)");
        if (bytes_.size() < 4 || read_raw<uint32_t>() != kGgufMagic) {
            error_at(0, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
        }
        const uint32_t version = read<uint32_t>("the version");
        if (version == 1) error_at(4, "GGUF version 1 is not supported (kiln reads versions 2 and 3)");
        if ((version & 0xFFFF) == 0 && version != 0)
            error_at(4, "this looks like a big-endian GGUF file; kiln reads little-endian files only");
        if (version != 2 && version != 3) error_at(4, "unknown GGUF version {} (kiln reads versions 2 and 3)", version);
        file_.version_ = version;

        const uint64_t tensor_count = read<uint64_t>("the tensor count");
        const uint64_t kv_count = read<uint64_t>("the metadata count");
        // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
        check_count(kv_count, 13, "metadata entries");
        read_metadata(kv_count);
        // A tensor info takes at least 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
        check_count(tensor_count, 24, "tensor infos");
        read_alignment();
        read_tensor_infos(tensor_count);
        place_tensors();
    }

private:
    GgufFile& file_;
    std::span<const std::byte> bytes_;
    uint64_t pos_ = 0;

    template <typename... Args>
    [[noreturn]] void error_at(uint64_t offset, fmt::format_string<Args...> format, Args&&... args) const {
        fail("gguf", "{}: {} (at byte {})", file_.name_, fmt::format(format, std::forward<Args>(args)...), offset);
    }
    template <typename... Args>
    [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
        fail("gguf", "{}: {}", file_.name_, fmt::format(format, std::forward<Args>(args)...));
    }

    uint64_t remaining() const { return bytes_.size() - pos_; }

    void need(uint64_t n, std::string_view what) const {
        if (n > remaining())
            error_at(pos_, "the file is truncated: {} needs {} bytes but only {} remain", what, n, remaining());
    }

    template <typename T>
    T read_raw() {
        T value;
        std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    template <typename T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        return read_raw<T>();
    }

    void check_count(uint64_t count, uint64_t min_each, std::string_view what) const {
        if (count > remaining() / min_each)
            error_at(pos_, "the file claims {} {}, which cannot fit in the {} bytes that remain "
                     "(a truncated file or a corrupt count)", count, what,
                     remaining());
    }

    std::string read_string(std::string_view what) {
        const uint64_t start = pos_;
        const uint64_t length = read<uint64_t>(what);
        if (length > remaining())
            error_at(start, "{} is a string of {} bytes, longer than the {} bytes left in the file", what, length,
                     remaining());
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
        pos_ += length;
        return s;
    }

    GgufType read_type(std::string_view what) {
        const uint64_t start = pos_;
        const uint32_t id = read<uint32_t>(what);
        if (id >= kGgufTypeCount) error_at(start, "{} has unknown value type {} (GGUF defines 0 to 12)", what, id);
        return static_cast<GgufType>(id);
    }

    GgufValue read_value(GgufType type, std::string_view what, int depth) {
        switch (type) {
            case GgufType::UINT8: return read<uint8_t>(what);
            case GgufType::INT8: return read<int8_t>(what);
            case GgufType::UINT16: return read<uint16_t>(what);
            case GgufType::INT16: return read<int16_t>(what);
            case GgufType::UINT32: return read<uint32_t>(what);
            case GgufType::INT32: return read<int32_t>(what);
            case GgufType::FLOAT32: return read<float>(what);
            case GgufType::BOOL: {
                const uint8_t b = read<uint8_t>(what);
                if (b > 1) error_at(pos_ - 1, "{} is a bool with value {} (expected 0 or 1)", what, b);
                return b == 1;
            }
            case GgufType::STRING: return read_string(what);
            case GgufType::ARRAY: return read_array(what, depth + 1);
            case GgufType::UINT64: return read<uint64_t>(what);
            case GgufType::INT64: return read<int64_t>(what);
            case GgufType::FLOAT64: return read<double>(what);
        }
        error_at(pos_, "{} has unknown value type", what);
    }

    GgufValue read_array(std::string_view what, int depth) {
        if (depth > kMaxArrayDepth)
            error_at(pos_, "{} nests arrays more than {} deep", what, kMaxArrayDepth);
        GgufArray array;
        array.element_type = read_type(what);
        const uint64_t count = read<uint64_t>(what);
        check_count(count, min_encoded_size(array.element_type),
                    fmt::format("{} elements in {}", gguf_type_name(array.element_type), what));
        array.items.reserve(std::min<uint64_t>(count, kMaxReserve));
        for (uint64_t i = 0; i < count; ++i) array.items.push_back(read_value(array.element_type, what, depth));
        return array;
    }

    void read_metadata(uint64_t count) {
        std::unordered_set<std::string> seen;
        for (uint64_t i = 0; i < count; ++i) {
            const uint64_t start = pos_;
            std::string key = read_string(fmt::format("the key of metadata entry {}", i));
            const std::string what = fmt::format("metadata key '{}'", printable(key));
            const GgufType type = read_type(what);
            GgufValue value = read_value(type, what, 0);
            if (!seen.insert(key).second) error_at(start, "metadata key '{}' appears twice", printable(key));
            file_.metadata_.push_back({std::move(key), std::move(value)});
        }
        // Index only after the vector stops growing: the index holds views of its keys.
        for (size_t i = 0; i < file_.metadata_.size(); ++i) file_.metadata_index_.emplace(file_.metadata_[i].key, i);
    }

    void read_alignment() {
        const GgufValue* value = file_.find("general.alignment");
        if (value == nullptr) return;
        const auto* alignment = std::get_if<uint32_t>(&value->value);
        if (alignment == nullptr)
            error("general.alignment has type {} (expected u32)", gguf_type_name(value->type()));
        if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0)
            error("general.alignment is {} (expected a power of two)", *alignment);
        file_.alignment_ = *alignment;
    }

    void read_tensor_infos(uint64_t count) {
        file_.tensors_.reserve(std::min<uint64_t>(count, kMaxReserve));
        for (uint64_t i = 0; i < count; ++i) {
            const uint64_t start = pos_;
            GgufTensor t;
            t.name = read_string(fmt::format("the name of tensor {}", i));
            const std::string what = fmt::format("tensor '{}'", printable(t.name));
            const uint32_t n_dims = read<uint32_t>(what);
            if (n_dims > kGgufMaxDims) error_at(start, "{} has {} dimensions (at most {})", what, n_dims, kGgufMaxDims);
            t.dims.resize(n_dims);
            for (uint64_t& d : t.dims) d = read<uint64_t>(what);
            const uint64_t type_at = pos_;
            const uint32_t type_id = read<uint32_t>(what);
            const TypeTraits* traits = find_type_traits(type_id);
            if (traits == nullptr) error_at(type_at, "{} has unknown tensor type id {}", what, type_id);
            t.type = traits->type;
            t.offset = read<uint64_t>(what);

            const auto elements = checked_element_count(t.dims);
            if (!elements) error_at(start, "{} has dimensions [{}] whose product overflows", what, fmt::join(t.dims, ", "));
            t.elements = *elements;
            if (!t.dims.empty() && t.dims[0] % static_cast<uint64_t>(traits->block_size) != 0)
                error_at(start, "{} has rows of {} elements, not a multiple of the {} block size {}", what, t.dims[0],
                         traits->name, traits->block_size);
            if (!checked_bytes(t.type, t.elements))
                error_at(start, "{} of type {} with {} elements is too large", what, traits->name, t.elements);
            if (t.offset % file_.alignment_ != 0)
                error_at(start, "{} has data offset {}, not a multiple of the alignment {}", what, t.offset,
                         file_.alignment_);
            file_.tensors_.push_back(std::move(t));
        }
        for (size_t i = 0; i < file_.tensors_.size(); ++i) {
            if (!file_.tensor_index_.emplace(file_.tensors_[i].name, i).second)
                error("tensor '{}' appears twice", printable(file_.tensors_[i].name));
        }
    }

    // Computes where the data section starts and checks that every tensor lies
    // inside it without overlapping another.
    void place_tensors() {
        const uint64_t a = file_.alignment_;
        const uint64_t padded = pos_ + (a - pos_ % a) % a;  // pos_ <= file size, so no overflow
        file_.data_offset_ = padded;
        if (file_.tensors_.empty()) return;  // vocabulary-only files may end without padding
        if (padded > bytes_.size())
            error("the file is truncated: the tensor data should start at byte {} but the file has {} bytes", padded,
                  bytes_.size());
        const uint64_t data_size = bytes_.size() - padded;
        std::vector<const GgufTensor*> by_offset;
        for (GgufTensor& t : file_.tensors_) {
            const uint64_t size = *checked_bytes(t.type, t.elements);
            if (t.offset > data_size || size > data_size - t.offset)
                error("tensor '{}' ({} bytes at data offset {}) ends past the end of the file ({} bytes of data)",
                      printable(t.name), size, t.offset, data_size);
            t.data = bytes_.subspan(padded + t.offset, size);
            by_offset.push_back(&t);
        }
        std::sort(by_offset.begin(), by_offset.end(),
                  [](const GgufTensor* x, const GgufTensor* y) { return x->offset < y->offset; });
        for (size_t i = 1; i < by_offset.size(); ++i) {
            const GgufTensor& prev = *by_offset[i - 1];
            if (prev.offset + prev.data.size() > by_offset[i]->offset)
                error("tensors '{}' and '{}' overlap in the data section", printable(prev.name),
                      printable(by_offset[i]->name));
        }
    }
};

GgufFile GgufFile::open(const std::filesystem::path& path) {
    refuse_folder_as_gguf(path);
    auto mapping = std::make_shared<const MappedFile>(path);
    refuse_checkpoint_as_gguf(path, mapping->bytes());
    GgufFile file = parse(mapping->bytes(), path.string());
    file.mapping_ = std::move(mapping);
    return file;
}

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
    GgufFile file;
    file.bytes_ = bytes;
    file.name_ = printable(name);  // it appears in every error message
    GgufParser(file).parse();
    verify_tensor_data_checksum(file);
    return file;
}

const GgufValue* GgufFile::find(std::string_view key) const noexcept {
    auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const noexcept {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name_, printable(key));
    if (const std::string* s = v->as_string()) return *s;
    fail("gguf", "{}: metadata key '{}' has type {} (expected str)", name_, key, gguf_type_name(v->type()));
}

int64_t GgufFile::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name_, printable(key));
    if (auto i = v->as_int()) return *i;
    fail("gguf", "{}: metadata key '{}' has type {} (expected an integer)", name_, key, gguf_type_name(v->type()));
}

double GgufFile::get_number(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name_, printable(key));
    if (auto d = v->as_number()) return *d;
    fail("gguf", "{}: metadata key '{}' has type {} (expected a number)", name_, key, gguf_type_name(v->type()));
}

const GgufTensor& GgufFile::get_tensor(std::string_view name) const {
    if (const GgufTensor* t = find_tensor(name)) return *t;
    fail("gguf", "{}: tensor '{}' is missing", name_, printable(name));
}

}  // namespace kiln
