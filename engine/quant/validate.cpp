#include "engine/quant/validate.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "engine/quant/blocks.h"

namespace kiln::quant {
namespace {

// Bit tests rather than conversions: an all-ones exponent is inf (zero
// mantissa) or NaN (any other).
std::optional<std::string_view> fp16_problem(uint16_t h) {
    if ((h & 0x7c00u) != 0x7c00u) return std::nullopt;
    return (h & 0x03ffu) ? "NaN" : "inf";
}
std::optional<std::string_view> bf16_problem(uint16_t h) {
    if ((h & 0x7f80u) != 0x7f80u) return std::nullopt;
    return (h & 0x007fu) ? "NaN" : "inf";
}
template <typename T>
std::optional<std::string_view> float_problem(T v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return "inf";
    return std::nullopt;
}

template <typename T>
T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // blocks in a GGUF file are unaligned
    return v;
}

// Plain element types: every value.
template <typename T, typename Check>
std::optional<InvalidBlock> check_values(std::span<const std::byte> data, Check check) {
    const size_t n = data.size() / sizeof(T);
    for (size_t i = 0; i < n; ++i)
        if (const auto problem = check(load<T>(data.data() + i * sizeof(T))))
            return InvalidBlock{i, "value", *problem};
    return std::nullopt;
}

// Block types: the fp16 fields at these offsets of every block.
std::optional<InvalidBlock> check_fp16_fields(
    std::span<const std::byte> data, size_t block_bytes,
    std::initializer_list<std::pair<size_t, std::string_view>> fields) {
    const size_t n = data.size() / block_bytes;
    for (size_t b = 0; b < n; ++b)
        for (const auto& [offset, name] : fields)
            if (const auto problem = fp16_problem(load<uint16_t>(data.data() + b * block_bytes + offset)))
                return InvalidBlock{b, name, *problem};
    return std::nullopt;
}

template <typename Block>
std::optional<InvalidBlock> check_d(std::span<const std::byte> data) {
    return check_fp16_fields(data, sizeof(Block), {{offsetof(Block, d), "d"}});
}

}  // namespace

std::optional<InvalidBlock> find_invalid_block(DType type, std::span<const std::byte> data) {
    switch (type) {
    case DType::F32: return check_values<float>(data, float_problem<float>);
    case DType::F64: return check_values<double>(data, float_problem<double>);
    case DType::F16: return check_values<uint16_t>(data, fp16_problem);
    case DType::BF16: return check_values<uint16_t>(data, bf16_problem);
    case DType::Q4_0: return check_d<BlockQ4_0>(data);
    case DType::Q5_0: return check_d<BlockQ5_0>(data);
    case DType::Q8_0: return check_d<BlockQ8_0>(data);
    case DType::Q3_K: return check_d<BlockQ3_K>(data);
    case DType::Q6_K: return check_d<BlockQ6_K>(data);
    case DType::IQ4_NL: return check_d<BlockIQ4_NL>(data);
    case DType::IQ4_XS: return check_d<BlockIQ4_XS>(data);
    case DType::Q4_1:
        return check_fp16_fields(data, sizeof(BlockQ4_1), {{offsetof(BlockQ4_1, d), "d"}, {offsetof(BlockQ4_1, m), "m"}});
    case DType::Q5_1:
        return check_fp16_fields(data, sizeof(BlockQ5_1), {{offsetof(BlockQ5_1, d), "d"}, {offsetof(BlockQ5_1, m), "m"}});
    case DType::Q2_K:
        return check_fp16_fields(data, sizeof(BlockQ2_K),
                                 {{offsetof(BlockQ2_K, d), "d"}, {offsetof(BlockQ2_K, dmin), "dmin"}});
    case DType::Q4_K:
        return check_fp16_fields(data, sizeof(BlockQ4_K),
                                 {{offsetof(BlockQ4_K, d), "d"}, {offsetof(BlockQ4_K, dmin), "dmin"}});
    case DType::Q5_K:
        return check_fp16_fields(data, sizeof(BlockQ5_K),
                                 {{offsetof(BlockQ5_K, d), "d"}, {offsetof(BlockQ5_K, dmin), "dmin"}});
    case DType::Q8_K: {
        // Q8_K's scale is a float (ggml checks only d, as here).
        const size_t n = data.size() / sizeof(BlockQ8_K);
        for (size_t b = 0; b < n; ++b)
            if (const auto problem =
                    float_problem(load<float>(data.data() + b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, d))))
                return InvalidBlock{b, "d", *problem};
        return std::nullopt;
    }
    default: return std::nullopt;
    }
}

}  // namespace kiln::quant
