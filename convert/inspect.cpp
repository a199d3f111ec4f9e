#include "convert/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "engine/models/architectures.h"
#include "engine/quant/file_type.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::convert {

namespace {

constexpr size_t kArrayPreview = 4;     // array elements shown before "... N more"
constexpr size_t kStringPreview = 64;   // characters of a string shown before cutting it

std::string quoted(const std::string& s) { return fmt::format("\"{}\"", printable(s, kStringPreview)); }

std::string type_label(const GgufValue& v) {
    if (const GgufArray* a = v.as_array())
        return fmt::format("[{}; {}]", gguf_type_name(a->element_type), a->items.size());
    return std::string(gguf_type_name(v.type()));
}

std::string show(const GgufValue& v) {
    return std::visit(
        [](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                return quoted(x);
            } else if constexpr (std::is_same_v<T, GgufArray>) {
                std::string out = "[";
                const size_t n = std::min(x.items.size(), kArrayPreview);
                for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + show(x.items[i]);
                if (x.items.size() > n) out += fmt::format(", ... {} more", x.items.size() - n);
                return out + "]";
            } else if constexpr (std::is_same_v<T, bool>) {
                return x ? "true" : "false";
            } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
                return fmt::format("{}", static_cast<int>(x));
            } else {
                return fmt::format("{}", x);
            }
        },
        v.value);
}

// 1234567 -> "1,234,567"
std::string grouped(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string human_bytes(uint64_t n) {
    if (n < 1024) return fmt::format("{} B", n);
    if (n < (1u << 20)) return fmt::format("{:.1f} KiB", n / 1024.0);
    if (n < (1u << 30)) return fmt::format("{:.1f} MiB", n / 1048576.0);
    return fmt::format("{:.2f} GiB", n / 1073741824.0);
}

}  // namespace

void inspect(const std::filesystem::path& path, std::FILE* out) {
    const GgufFile file = GgufFile::open(path);
    fmt::print(out, "{}: GGUF v{}, {} metadata entries, {} tensors, alignment {}, data at byte {}\n\n", file.name(),
               file.version(), file.metadata().size(), file.tensors().size(), file.alignment(), file.data_offset());

    size_t key_width = 3;
    for (const GgufEntry& e : file.metadata()) key_width = std::max(key_width, e.key.size());
    fmt::print(out, "metadata:\n");
    for (const GgufEntry& e : file.metadata())
        fmt::print(out, "  {:<{}}  {:<12}  {}\n", printable(e.key), key_width, type_label(e.value), show(e.value));

    size_t name_width = 4;
    for (const GgufTensor& t : file.tensors()) name_width = std::max(name_width, t.name.size());
    fmt::print(out, "\ntensors:\n  {:>4}  {:<{}}  {:<7}  {:<22}  {:>12}\n", "#", "name", name_width, "type", "shape",
               "bytes");
    uint64_t parameters = 0;
    for (size_t i = 0; i < file.tensors().size(); ++i) {
        const GgufTensor& t = file.tensors()[i];
        parameters += t.elements;
        fmt::print(out, "  {:>4}  {:<{}}  {:<7}  {:<22}  {:>12}\n", i, printable(t.name), name_width, dtype_name(t.type),
                   fmt::format("[{}]", fmt::join(t.dims, ", ")), grouped(t.data.size()));
    }

    const GgufValue* arch = file.find("general.architecture");
    const std::string architecture = arch && arch->as_string() ? *arch->as_string() : "(no general.architecture)";
    std::vector<DType> types;
    for (const GgufTensor& t : file.tensors()) types.push_back(t.type);
    const GgufValue* file_type = file.find("general.file_type");
    std::optional<uint32_t> file_type_value;
    if (file_type && file_type->as_int() && *file_type->as_int() >= 0 && *file_type->as_int() <= UINT32_MAX)
        file_type_value = static_cast<uint32_t>(*file_type->as_int());
    fmt::print(out, "\nfile type: {}\n", describe_file_type(file_type_value, types));
    fmt::print(out, "\nsummary: architecture {}, {} tensors, {} parameters, file size {} bytes ({})\n", architecture,
               file.tensors().size(), grouped(parameters), grouped(file.file_size()), human_bytes(file.file_size()));
    // The loader's own checks (the architecture's descriptor), without loading the weights.
    try {
        fmt::print(out, "kiln runs it: yes ({})\n", check_model(file));
    } catch (const Error& e) {
        fmt::print(out, "kiln runs it: no: {}\n", e.what());
    }
}

}  // namespace kiln::convert
