#include "engine/core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

#include "engine/quant/blocks.h"
#include "engine/quant/iq4_quants.h"
#include "engine/quant/kquants.h"
#include "engine/quant/legacy_quants.h"
#include "engine/quant/reference.h"

namespace kiln {
namespace {

using namespace kiln::quant;

// Layouts of every ggml type, so that any valid GGUF file can be measured and
// inspected; the sizes of the types kiln has block structs for come from them. Only the types with conversions can be computed with.
constexpr std::array kTypes = {
    TypeTraits{DType::F32, "f32", 1, 4, false, f32_to_float, f32_from_float},
    TypeTraits{DType::F16, "f16", 1, 2, false, f16_to_float, f16_from_float_ref},
    TypeTraits{DType::Q4_0, "q4_0", 32, sizeof(BlockQ4_0), true, q4_0_to_float, q4_0_from_float_ref},
    TypeTraits{DType::Q4_1, "q4_1", 32, sizeof(BlockQ4_1), true, q4_1_to_float, q4_1_from_float_ref},
    TypeTraits{DType::Q5_0, "q5_0", 32, sizeof(BlockQ5_0), true, q5_0_to_float, q5_0_from_float_ref},
    TypeTraits{DType::Q5_1, "q5_1", 32, sizeof(BlockQ5_1), true, q5_1_to_float, q5_1_from_float_ref},
    TypeTraits{DType::Q8_0, "q8_0", 32, sizeof(BlockQ8_0), true, q8_0_to_float, q8_0_from_float_ref},
    TypeTraits{DType::Q8_1, "q8_1", 32, sizeof(BlockQ8_1), true, q8_1_to_float, q8_1_from_float_ref},
    TypeTraits{DType::Q2_K, "q2_K", kQK_K, sizeof(BlockQ2_K), true, q2_k_to_float, q2_k_from_float_ref},
    TypeTraits{DType::Q3_K, "q3_K", kQK_K, sizeof(BlockQ3_K), true, q3_k_to_float, q3_k_from_float_ref},
    TypeTraits{DType::Q4_K, "q4_K", kQK_K, sizeof(BlockQ4_K), true, q4_k_to_float, q4_k_from_float_ref},
    TypeTraits{DType::Q5_K, "q5_K", kQK_K, sizeof(BlockQ5_K), true, q5_k_to_float, q5_k_from_float_ref},
    TypeTraits{DType::Q6_K, "q6_K", kQK_K, sizeof(BlockQ6_K), true, q6_k_to_float, q6_k_from_float_ref},
    TypeTraits{DType::Q8_K, "q8_K", kQK_K, sizeof(BlockQ8_K), true, q8_k_to_float, q8_k_from_float_ref},
    TypeTraits{DType::IQ2_XXS, "iq2_xxs", 256, 66, true, nullptr, nullptr},
    TypeTraits{DType::IQ2_XS, "iq2_xs", 256, 74, true, nullptr, nullptr},
    TypeTraits{DType::IQ3_XXS, "iq3_xxs", 256, 98, true, nullptr, nullptr},
    TypeTraits{DType::IQ1_S, "iq1_s", 256, 50, true, nullptr, nullptr},
    TypeTraits{DType::IQ4_NL, "iq4_nl", 32, sizeof(BlockIQ4_NL), true, iq4_nl_to_float, iq4_nl_from_float_ref},
    TypeTraits{DType::IQ3_S, "iq3_s", 256, 110, true, nullptr, nullptr},
    TypeTraits{DType::IQ2_S, "iq2_s", 256, 82, true, nullptr, nullptr},
    TypeTraits{DType::IQ4_XS, "iq4_xs", kQK_K, sizeof(BlockIQ4_XS), true, iq4_xs_to_float, iq4_xs_from_float_ref},
    TypeTraits{DType::I8, "i8", 1, 1, false, nullptr, nullptr},
    TypeTraits{DType::I16, "i16", 1, 2, false, nullptr, nullptr},
    TypeTraits{DType::I32, "i32", 1, 4, false, nullptr, nullptr},
    TypeTraits{DType::I64, "i64", 1, 8, false, nullptr, nullptr},
    TypeTraits{DType::F64, "f64", 1, 8, false, nullptr, nullptr},
    TypeTraits{DType::IQ1_M, "iq1_m", 256, 56, true, nullptr, nullptr},
    TypeTraits{DType::BF16, "bf16", 1, 2, false, bf16_to_float, bf16_from_float_ref},
    TypeTraits{DType::TQ1_0, "tq1_0", 256, 54, true, nullptr, nullptr},
    TypeTraits{DType::TQ2_0, "tq2_0", 256, 66, true, nullptr, nullptr},
    TypeTraits{DType::MXFP4, "mxfp4", 32, 17, true, nullptr, nullptr},
};

// Interleaved layouts: the bytes of 16 rows of the plain type, rearranged; a
// single row has no conversion of its own.
constexpr std::array kInterleavedTypes = {
    TypeTraits{DType::Q4_0_R16, "q4_0_r16", 32, sizeof(BlockQ4_0), true, nullptr, nullptr},
    TypeTraits{DType::Q8_0_R16, "q8_0_r16", 32, sizeof(BlockQ8_0), true, nullptr, nullptr},
    TypeTraits{DType::Q4_K_R16, "q4_K_r16", kQK_K, sizeof(BlockQ4_K), true, nullptr, nullptr},
    TypeTraits{DType::Q5_K_R16, "q5_K_r16", kQK_K, sizeof(BlockQ5_K), true, nullptr, nullptr},
    TypeTraits{DType::Q6_K_R16, "q6_K_r16", kQK_K, sizeof(BlockQ6_K), true, nullptr, nullptr},
    TypeTraits{DType::Q6_K_R16B, "q6_K_r16b", kQK_K, sizeof(BlockQ6_K), true, nullptr, nullptr},
};

constexpr bool sorted_by_id() {
    for (size_t i = 1; i < kTypes.size(); ++i)
        if (static_cast<uint32_t>(kTypes[i - 1].type) >= static_cast<uint32_t>(kTypes[i].type)) return false;
    return true;
}
static_assert(sorted_by_id(), "keep the type table in id order");

}  // namespace

const TypeTraits* find_type_traits(uint32_t id) noexcept {
    auto it = std::lower_bound(kTypes.begin(), kTypes.end(), id,
                               [](const TypeTraits& t, uint32_t v) { return static_cast<uint32_t>(t.type) < v; });
    if (it == kTypes.end() || static_cast<uint32_t>(it->type) != id) return nullptr;
    return &*it;
}

const TypeTraits& type_traits(DType type) noexcept {
    if (const TypeTraits* t = find_type_traits(static_cast<uint32_t>(type))) return *t;
    for (const TypeTraits& t : kInterleavedTypes)
        if (t.type == type) return t;
    return kTypes.front();  // unreachable for a DType value
}

std::span<const TypeTraits> all_type_traits() noexcept { return kTypes; }

std::optional<DType> parse_dtype(std::string_view name) noexcept {
    for (const auto& t : kTypes) {
        if (t.name.size() != name.size()) continue;
        bool same = std::equal(name.begin(), name.end(), t.name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        });
        if (same) return t.type;
    }
    return std::nullopt;
}

std::optional<uint64_t> checked_bytes(DType type, uint64_t count) noexcept {
    const TypeTraits& t = type_traits(type);
    const auto block = static_cast<uint64_t>(t.block_size);
    if (count % block != 0) return std::nullopt;
    const uint64_t blocks = count / block;
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (blocks != 0 && t.block_bytes > kMax / blocks) return std::nullopt;
    return blocks * t.block_bytes;
}

std::optional<uint64_t> checked_element_count(std::span<const uint64_t> dims) noexcept {
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    uint64_t product = 1;
    for (uint64_t d : dims) {
        if (d > kMax) return std::nullopt;
        if (d != 0 && product > kMax / d) return std::nullopt;
        product *= d;
    }
    return product;
}

}  // namespace kiln
