#include "formats/gguf/gguf_value.h"

#include <array>
#include <limits>

namespace kiln {

std::string_view gguf_type_name(GgufType type) noexcept {
    static constexpr std::array<std::string_view, kGgufTypeCount> kNames = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    const auto index = static_cast<uint32_t>(type);
    return index < kNames.size() ? kNames[index] : std::string_view("?");
}

std::optional<int64_t> GgufValue::as_int() const noexcept {
    return std::visit(
        [](const auto& v) -> std::optional<int64_t> {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, uint64_t>) {
                if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
                return static_cast<int64_t>(v);
            } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                return static_cast<int64_t>(v);
            } else {
                return std::nullopt;
            }
        },
        value);
}

std::optional<double> GgufValue::as_number() const noexcept {
    return std::visit(
        [](const auto& v) -> std::optional<double> {
            using T = std::decay_t<decltype(v)>;
            if constexpr ((std::is_integral_v<T> && !std::is_same_v<T, bool>) || std::is_floating_point_v<T>)
                return static_cast<double>(v);
            else
                return std::nullopt;
        },
        value);
}

std::optional<bool> GgufValue::as_bool() const noexcept {
    if (const bool* b = std::get_if<bool>(&value)) return *b;
    return std::nullopt;
}

}  // namespace kiln
