#include "formats/gguf/gguf_writer.h"

#include <cstring>
#include <type_traits>
#include <unordered_set>

#include "engine/core/error.h"
#include "formats/gguf/gguf_checksum.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/crc32.h"
#include "formats/io/atomic_file.h"

namespace kiln {

namespace {

class VectorSink {
public:
    std::vector<std::byte> bytes;
    void write(std::span<const std::byte> b) { bytes.insert(bytes.end(), b.begin(), b.end()); }
    void write_zeros(size_t n) { bytes.resize(bytes.size() + n); }
    uint64_t bytes_written() const { return bytes.size(); }
};

template <typename Sink, typename T>
void put(Sink& sink, const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    sink.write(std::as_bytes(std::span<const T>(&value, 1)));
}

template <typename Sink>
void put_string(Sink& sink, std::string_view s) {
    put<Sink, uint64_t>(sink, s.size());
    sink.write(std::as_bytes(std::span<const char>(s.data(), s.size())));
}

template <typename Sink>
void put_value(Sink& sink, const GgufValue& value) {
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                put_string(sink, v);
            } else if constexpr (std::is_same_v<T, GgufArray>) {
                put<Sink, uint32_t>(sink, static_cast<uint32_t>(v.element_type));
                put<Sink, uint64_t>(sink, v.items.size());
                for (const GgufValue& item : v.items) put_value(sink, item);
            } else if constexpr (std::is_same_v<T, bool>) {
                put<Sink, uint8_t>(sink, v ? 1 : 0);
            } else {
                put<Sink, T>(sink, v);
            }
        },
        value.value);
}

// Arrays must hold what they say they hold, or a reader would misparse the file.
void check_array_types(const GgufValue& value, std::string_view key) {
    const GgufArray* array = value.as_array();
    if (array == nullptr) return;
    for (const GgufValue& item : array->items) {
        if (item.type() != array->element_type)
            fail("gguf", "metadata key '{}': array of {} holds a {} element", key, gguf_type_name(array->element_type),
                 gguf_type_name(item.type()));
        check_array_types(item, key);
    }
}

uint64_t pad_to(uint64_t offset, uint64_t alignment) { return (alignment - offset % alignment) % alignment; }

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
    check_array_types(value, key);
    if (key == "general.alignment") {
        const auto* a = std::get_if<uint32_t>(&value.value);
        if (a == nullptr || *a == 0 || (*a & (*a - 1)) != 0)
            fail("gguf", "general.alignment must be a u32 power of two");
    }
    for (Entry& e : metadata_) {
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    }
    metadata_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<uint64_t> dims, std::span<const std::byte> data) {
    if (dims.size() > kGgufMaxDims) fail("gguf", "tensor '{}' has {} dimensions (at most {})", name, dims.size(), kGgufMaxDims);
    const TypeTraits& traits = type_traits(type);
    if (!dims.empty() && dims[0] % static_cast<uint64_t>(traits.block_size) != 0)
        fail("gguf", "tensor '{}' has rows of {} elements, not a multiple of the {} block size {}", name, dims[0],
             traits.name, traits.block_size);
    const auto elements = checked_element_count(dims);
    const auto bytes = elements ? checked_bytes(type, *elements) : std::nullopt;
    if (!bytes) fail("gguf", "tensor '{}' is too large", name);
    if (*bytes != data.size())
        fail("gguf", "tensor '{}' of type {} and shape [{}] needs {} bytes, got {}", name, traits.name,
             fmt::join(dims, ", "), *bytes, data.size());
    for (const Tensor& t : tensors_)
        if (t.name == name) fail("gguf", "tensor '{}' added twice", name);
    tensors_.push_back({std::move(name), type, std::move(dims), data});
}

void GgufWriter::add_tensor_data_checksum() {
    uint32_t crc = 0;
    for (const Tensor& t : tensors_) crc = crc32_update(crc, t.data);
    set(kTensorDataChecksumKey, GgufValue(crc));
}

uint64_t GgufWriter::alignment() const {
    for (const Entry& e : metadata_)
        if (e.key == "general.alignment") return std::get<uint32_t>(e.value.value);
    return kGgufDefaultAlignment;
}

template <typename Sink>
void GgufWriter::serialize(Sink& sink) const {
    const uint64_t align = alignment();
    put<Sink, uint32_t>(sink, kGgufMagic);
    put<Sink, uint32_t>(sink, 3);
    put<Sink, uint64_t>(sink, tensors_.size());
    put<Sink, uint64_t>(sink, metadata_.size());
    for (const Entry& e : metadata_) {
        put_string(sink, e.key);
        put<Sink, uint32_t>(sink, static_cast<uint32_t>(e.value.type()));
        put_value(sink, e.value);
    }
    uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
        put_string(sink, t.name);
        put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.dims.size()));
        for (uint64_t d : t.dims) put<Sink, uint64_t>(sink, d);
        put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.type));
        put<Sink, uint64_t>(sink, offset);
        offset += t.data.size() + pad_to(t.data.size(), align);
    }
    // llama.cpp pads to the data section only when there is data: vocabulary-only
    // files end right after the metadata. Matching it keeps rewrites byte-identical.
    if (!tensors_.empty()) sink.write_zeros(pad_to(sink.bytes_written(), align));
    for (const Tensor& t : tensors_) {
        sink.write(t.data);
        sink.write_zeros(pad_to(t.data.size(), align));
    }
}

void GgufWriter::write(const std::filesystem::path& path) const {
    AtomicFile file(path);
    serialize(file);
    file.commit();
}

std::vector<std::byte> GgufWriter::to_bytes() const {
    VectorSink sink;
    serialize(sink);
    return std::move(sink.bytes);
}

}  // namespace kiln
