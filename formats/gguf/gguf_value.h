#pragma once
// A GGUF metadata value: one of the 13 GGUF value types, arrays possibly nested.
// The variant's alternatives are listed in GGUF's own type-id order, so the
// variant index *is* the type id written in the file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln {

enum class GgufType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;

std::string_view gguf_type_name(GgufType type) noexcept;

struct GgufValue;

struct GgufArray {
    GgufType element_type = GgufType::UINT8;
    std::vector<GgufValue> items;
    bool operator==(const GgufArray&) const = default;
};

struct GgufValue {
    using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                                 std::string, GgufArray, uint64_t, int64_t, double>;
    Storage value;

    GgufValue() = default;
    template <typename T>
        requires std::is_constructible_v<Storage, T>
    GgufValue(T v) : value(std::move(v)) {}  // NOLINT: implicit on purpose, values read naturally
    GgufValue(const char* s) : value(std::string(s)) {}

    GgufType type() const noexcept { return static_cast<GgufType>(value.index()); }
    bool operator==(const GgufValue&) const = default;

    // Any integer type (bool excluded) as signed 64-bit, when it fits.
    std::optional<int64_t> as_int() const noexcept;
    // Any integer or float type as double.
    std::optional<double> as_number() const noexcept;
    const std::string* as_string() const noexcept { return std::get_if<std::string>(&value); }
    const GgufArray* as_array() const noexcept { return std::get_if<GgufArray>(&value); }
    std::optional<bool> as_bool() const noexcept;
};

// Convenience for building arrays of one element type.
template <typename T>
GgufValue gguf_array(GgufType element_type, const std::vector<T>& items) {
    GgufArray array{element_type, {}};
    array.items.reserve(items.size());
    for (const T& item : items) array.items.emplace_back(item);
    return GgufValue(std::move(array));
}

}  // namespace kiln
