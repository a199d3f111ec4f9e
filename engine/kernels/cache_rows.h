#pragma once
// Reading a KV cache row of any cache type as floats, for the attention
// kernel: one element (scalar tails) or one SIMD batch of elements (the body),
// straight from the stored row, with no dequantized copy of the cache.
//
// A row is a typed pointer to its first storage unit: a float (F32), the bits
// of a half (F16), of a bfloat16 (BF16), or a 32-element block (Q8_0, Q4_0,
// ggml's layouts from engine/quant/blocks.h). Element d of a block row lies in
// block d / 32.
//
// Every conversion is exact: a half or bfloat16 widens exactly, and a block's
// code times its half-precision scale has at most 8 + 11 significant bits, so
// its float product is exact too. The kernel therefore sees precisely the
// values an F32 cache holding the dequantized rows holds, and gives the same
// bits for them (tests/test_kv_cache_types.cpp checks this).
#include <cstddef>
#include <cstdint>

#include "engine/core/half.h"
#include "engine/kernels/simd.h"
#include "engine/quant/blocks.h"

namespace kiln::kernels::cache_rows {

using batch = xsimd::batch<float>;
inline constexpr int64_t W = static_cast<int64_t>(batch::size);

// A half's bits (F16), as the cache stores them.
using Half = uint16_t;
// A bfloat16's bits (BF16): its own type, so loads can tell it from a half.
struct BHalf {
    uint16_t bits;
};
static_assert(sizeof(BHalf) == 2);

// Elements per storage unit: 1, or a block's 32.
template <class T>
inline constexpr int64_t kPerUnit = 1;
template <>
inline constexpr int64_t kPerUnit<quant::BlockQ8_0> = quant::kQK8_0;
template <>
inline constexpr int64_t kPerUnit<quant::BlockQ4_0> = quant::kQK4_0;

// Bytes that elements [d, d + n) of a row span (d and n whole units).
template <class T>
constexpr size_t span_bytes(int64_t n) noexcept {
    return static_cast<size_t>(n / kPerUnit<T>) * sizeof(T);
}
template <class T>
const std::byte* address(const T* row, int64_t d) noexcept {
    return reinterpret_cast<const std::byte*>(row) + span_bytes<T>(d);
}

// A block's half-precision scale as a float (exact either way).
inline float block_scale(uint16_t d) noexcept {
#if defined(__F16C__)
    return _cvtsh_ss(d);
#else
    return fp16_to_fp32(d);
#endif
}

// The 4-bit code of element i (0..31) of a Q4_0 block, without its offset:
// byte i holds element i in its low nibble and element i + 16 in its high one.
inline int q4_code(const quant::BlockQ4_0& b, int64_t i) noexcept {
    return i < 16 ? (b.qs[i] & 0x0F) : (b.qs[i - 16] >> 4);
}

// ---------------------------------------------------------------- one element

inline float element(const float* row, int64_t d) noexcept { return row[d]; }
inline float element(const Half* row, int64_t d) noexcept { return fp16_to_fp32(row[d]); }
inline float element(const BHalf* row, int64_t d) noexcept { return bf16_to_fp32(row[d].bits); }
inline float element(const quant::BlockQ8_0* row, int64_t d) noexcept {
    const quant::BlockQ8_0& b = row[d / quant::kQK8_0];
    return static_cast<float>(b.qs[d % quant::kQK8_0]) * block_scale(b.d);
}
inline float element(const quant::BlockQ4_0* row, int64_t d) noexcept {
    const quant::BlockQ4_0& b = row[d / quant::kQK4_0];
    return static_cast<float>(q4_code(b, d % quant::kQK4_0) - 8) * block_scale(b.d);
}

// ------------------------------------------ W elements from d (d % W == 0)

inline batch load(const float* row, int64_t d) noexcept { return batch::load_unaligned(row + d); }

inline batch load(const Half* row, int64_t d) noexcept {
    const Half* p = row + d;
#if defined(__AVX512F__)  // xsimd's batch is then 16 floats
    static_assert(W == 16);
    return batch(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__AVX__) && defined(__F16C__)  // 8 floats
    static_assert(W == 8);
    return batch(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
    alignas(64) float wide[W];
    for (int64_t i = 0; i < W; ++i) wide[i] = fp16_to_fp32(p[i]);
    return batch::load_aligned(wide);
#endif
}

inline batch load(const BHalf* row, int64_t d) noexcept {
    const BHalf* p = row + d;
#if defined(__AVX512F__)
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return batch(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
#elif defined(__AVX2__)
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return batch(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
#else
    alignas(64) float wide[W];
    for (int64_t i = 0; i < W; ++i) wide[i] = bf16_to_fp32(p[i].bits);
    return batch::load_aligned(wide);
#endif
}

// Block rows: W divides 32 (4, 8 or 16 floats), so W elements from a multiple
// of W lie in one block.
static_assert(quant::kQK8_0 % W == 0 && quant::kQK4_0 % W == 0);

inline batch load(const quant::BlockQ8_0* row, int64_t d) noexcept {
    const quant::BlockQ8_0& b = row[d / quant::kQK8_0];
    const int8_t* codes = b.qs + d % quant::kQK8_0;
    const batch scale(block_scale(b.d));
#if defined(__AVX512F__)
    const __m512i wide = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    return batch(_mm512_cvtepi32_ps(wide)) * scale;
#elif defined(__AVX2__)
    const __m256i wide = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return batch(_mm256_cvtepi32_ps(wide)) * scale;
#else
    alignas(64) float wide[W];
    for (int64_t i = 0; i < W; ++i) wide[i] = static_cast<float>(codes[i]);
    return batch::load_aligned(wide) * scale;
#endif
}

inline batch load(const quant::BlockQ4_0* row, int64_t d) noexcept {
    const quant::BlockQ4_0& b = row[d / quant::kQK4_0];
    const int64_t i = d % quant::kQK4_0;
    const uint8_t* bytes = b.qs + i % 16;  // elements i.. are the low (i < 16) or high nibbles from here
    const int shift = i < 16 ? 0 : 4;
    const batch scale(block_scale(b.d));
#if defined(__AVX512F__)
    __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
    codes = _mm_and_si128(_mm_srl_epi16(codes, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0F));
    const __m512i wide = _mm512_sub_epi32(_mm512_cvtepu8_epi32(codes), _mm512_set1_epi32(8));
    return batch(_mm512_cvtepi32_ps(wide)) * scale;
#elif defined(__AVX2__)
    __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
    codes = _mm_and_si128(_mm_srl_epi16(codes, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0F));
    const __m256i wide = _mm256_sub_epi32(_mm256_cvtepu8_epi32(codes), _mm256_set1_epi32(8));
    return batch(_mm256_cvtepi32_ps(wide)) * scale;
#else
    alignas(64) float wide[W];
    for (int64_t k = 0; k < W; ++k) wide[k] = static_cast<float>(((bytes[k] >> shift) & 0x0F) - 8);
    return batch::load_aligned(wide) * scale;
#endif
}

}  // namespace kiln::kernels::cache_rows
