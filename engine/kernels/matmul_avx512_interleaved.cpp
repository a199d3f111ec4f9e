// Decode kernels of the "avx512-vnni" set for the interleaved layouts
// (quant/interleave.h): Q4_K_R16, Q5_K_R16 and Q6_K_R16 weights against
// Q8_K-prepared tokens, Q8_0_R16 and Q4_0_R16 against Q8_0-prepared ones.
//
// Rows sit in the 16 lanes. A 64-byte load holds the same 4 code bytes of 16
// rows; its low nibbles are 4 elements of one sub-block and its high nibbles 4
// of the next, so two vpdpbusd against a broadcast quad of the token's codes
// add 4 products into each row's lane. Per sub-block the exact int32 sums are
// multiplied by each row's 6-bit scale (decoded for all 16 rows at once from
// the three interleaved scale words) and summed over the super-block in
// int32; the min term likewise, against the token's sums of 32 codes. Then,
// per super-block, acc += isum * (d * dx) - msum * (dmin * dx) in float, as
// the plain kernels do, so each row's float work is the reference's terms
// summed in order, only with the product and sum fused.
//
// Per 16 rows and super-block this is 32 loads, 64 vpdpbusd and about 150 other
// instructions, against about 50 per row for the plain tiles, which unpack and
// scale each row by itself. Prompts (8 tokens or more) run the K-quant GEMM,
// which takes interleaved blocks as it takes plain ones.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/simd.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <cstring>
#include <utility>

#include "engine/quant/interleave.h"

namespace kiln::kernels::detail {
namespace {

constexpr int64_t kGroupRows = quant::kInterleaveRows;
constexpr int64_t kGroupBlockBytes = 16 * 144;  // one super-block of 16 Q4_K rows
constexpr int64_t kXBytes = 292, kXCodes = 4, kXBsums = 260;  // a Q8_K block
constexpr int64_t kPrefetchBytes = 8192;
constexpr int kMaxTokens = 4;
constexpr int64_t kGemmTokens = 8;        // as the plain K-quant kernels
constexpr int64_t kLegacyGemmTokens = 4;  // as the plain Q8_0 / Q4_0 kernels

inline __m512i bcast32(const std::byte* p) noexcept {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// Byte `b` (0..3) of each lane, as int32.
inline __m512i lane_byte(__m512i words, int b) noexcept {
    return _mm512_and_si512(_mm512_srli_epi32(words, 8 * b), _mm512_set1_epi32(0xFF));
}

// Bit `bit` of each byte moved to bit 4 (the fifth bit of a Q5_K code).
template <int bit>
inline __m512i fifth_bit(__m512i v) noexcept {
    const __m512i at4 = bit < 4 ? _mm512_slli_epi16(v, 4 - bit) : bit > 4 ? _mm512_srli_epi16(v, bit - 4) : v;
    return _mm512_and_si512(at4, _mm512_set1_epi8(0x10));
}

// out[t * out_stride + r] for the group's 16 rows and NT tokens; Q4_K_R16, or
// Q5_K_R16 (the same with a fifth bit per code from the qh quads: element
// 64g + l has bit 2g of qh byte l, element 64g + 32 + l bit 2g + 1).
template <DType T, int NT>
void q45_k_r16_group(int64_t nb, const std::byte* group, const std::byte* x, size_t x_stride, float* out,
                     int64_t out_stride) noexcept {
    constexpr bool kFive = T == DType::Q5_K_R16;
    constexpr int64_t kBlockBytes = kFive ? 16 * 176 : kGroupBlockBytes;
    constexpr int64_t kCodes = kFive ? 768 : 256, kHigh = 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kBlockBytes;
        for (int64_t off = 0; off < kBlockBytes; off += 64) __builtin_prefetch(gb + kPrefetchBytes + off, 0, 3);
        const __m512i a = _mm512_loadu_si512(gb + 64), b = _mm512_loadu_si512(gb + 128);
        const __m512i c = _mm512_loadu_si512(gb + 192);
        const __m512i hi2 = _mm512_set1_epi32(0x30303030), six = _mm512_set1_epi32(0x3F3F3F3F);
        const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
        // Scales and mins of sub-blocks 0-3 (bytes of *_lo) and 4-7 (*_hi).
        const __m512i sc_lo = _mm512_and_si512(a, six), m_lo = _mm512_and_si512(b, six);
        const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(c, nib), _mm512_and_si512(_mm512_srli_epi32(a, 2), hi2));
        const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), nib),
                                             _mm512_and_si512(_mm512_srli_epi32(b, 2), hi2));
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        const auto sub_blocks = [&](auto g_constant) {  // elements 64g .. 64g + 63: sub-blocks 2g (low nibbles), 2g + 1
            constexpr int g = decltype(g_constant)::value;
            __m512i plo[NT], phi[NT];
            for (int t = 0; t < NT; ++t) plo[t] = phi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                const __m512i v = _mm512_loadu_si512(gb + kCodes + (8 * g + j) * 64);
                __m512i lo = _mm512_and_si512(v, low4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                if constexpr (kFive) {
                    const __m512i h = _mm512_loadu_si512(gb + kHigh + j * 64);
                    lo = _mm512_or_si512(lo, fifth_bit<2 * g>(h));
                    hi = _mm512_or_si512(hi, fifth_bit<2 * g + 1>(h));
                }
                for (int t = 0; t < NT; ++t) {
                    const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes + 64 * g + 4 * j;
                    plo[t] = _mm512_dpbusd_epi32(plo[t], lo, bcast32(xq));
                    phi[t] = _mm512_dpbusd_epi32(phi[t], hi, bcast32(xq + 32));
                }
            }
            const __m512i words = g < 2 ? sc_lo : sc_hi;
            const __m512i s0 = lane_byte(words, (2 * g) % 4), s1 = lane_byte(words, (2 * g + 1) % 4);
            for (int t = 0; t < NT; ++t)
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(plo[t], s0),
                                                                     _mm512_mullo_epi32(phi[t], s1)));
        };
        sub_blocks(std::integral_constant<int, 0>{});
        sub_blocks(std::integral_constant<int, 1>{});
        sub_blocks(std::integral_constant<int, 2>{});
        sub_blocks(std::integral_constant<int, 3>{});
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + 32)));
        for (int t = 0; t < NT; ++t) {
            const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + i * kXBytes;
            int16_t bsums[16];
            std::memcpy(bsums, xb + kXBsums, sizeof(bsums));
            __m512i msum = _mm512_setzero_si512();
            for (int s = 0; s < 8; ++s) {
                const __m512i m = lane_byte(s < 4 ? m_lo : m_hi, s % 4);
                msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(m, _mm512_set1_epi32(bsums[2 * s] + bsums[2 * s + 1])));
            }
            float dx;
            std::memcpy(&dx, xb, 4);
            const __m512 vdx = _mm512_set1_ps(dx);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, vdx), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, vdx), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

constexpr int64_t kQ6GroupBlockBytes = 16 * 210;
constexpr int64_t kQ6Scales = 32, kQ6Low = 288, kQ6High = 2336;

// Signed byte `b` (0..3) of each lane, as int32.
inline __m512i lane_sbyte(__m512i words, int b) noexcept {
    return _mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * b), 24);
}

// Q6_K_R16: codes q in [0, 63] are 4 low bits from a ql quad and 2 high bits
// from a qh quad; each qh quad serves four code vectors (elements 128n + 4j
// + {0, 32, 64, 96}, the layout of ggml's Q6_K). The -32 offset is taken out
// of each sub-block's int32 sum (32 x the token's sum of its 16 codes) before
// the sub-block's scale multiplies it.
template <int NT>
void q6_k_r16_group(int64_t nb, const std::byte* group, const std::byte* x, size_t x_stride, float* out,
                    int64_t out_stride) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kQ6GroupBlockBytes;
        for (int64_t off = 0; off < kQ6GroupBlockBytes; off += 64) __builtin_prefetch(gb + kPrefetchBytes + off, 0, 3);
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        for (int n = 0; n < 2; ++n) {      // elements 128n .. 128n + 127
            for (int h = 0; h < 2; ++h) {  // quads j = 4h .. 4h + 3: sub-blocks 8n + h + {0, 2, 4, 6}
                __m512i p[NT][4];
                for (int t = 0; t < NT; ++t)
                    for (int e = 0; e < 4; ++e) p[t][e] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int j = 4 * h; j < 4 * h + 4; ++j) {
                    const __m512i l0 = _mm512_loadu_si512(gb + kQ6Low + (16 * n + j) * 64);
                    const __m512i l1 = _mm512_loadu_si512(gb + kQ6Low + (16 * n + 8 + j) * 64);
                    const __m512i hb = _mm512_loadu_si512(gb + kQ6High + (8 * n + j) * 64);
                    const __m512i q[4] = {
                        _mm512_or_si512(_mm512_and_si512(l0, low4), _mm512_and_si512(_mm512_slli_epi16(hb, 4), bits45)),
                        _mm512_or_si512(_mm512_and_si512(l1, low4), _mm512_and_si512(_mm512_slli_epi16(hb, 2), bits45)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low4), _mm512_and_si512(hb, bits45)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low4),
                                        _mm512_and_si512(_mm512_srli_epi16(hb, 2), bits45)),
                    };
                    for (int t = 0; t < NT; ++t) {
                        const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes + 128 * n + 4 * j;
                        for (int e = 0; e < 4; ++e) p[t][e] = _mm512_dpbusd_epi32(p[t][e], q[e], bcast32(xq + 32 * e));
                    }
                }
                for (int e = 0; e < 4; ++e) {
                    const int sb = 8 * n + h + 2 * e;
                    const __m512i sc = lane_sbyte(_mm512_loadu_si512(gb + kQ6Scales + 64 * (sb / 4)), sb % 4);
                    for (int t = 0; t < NT; ++t) {
                        int16_t bsum;
                        std::memcpy(&bsum, x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXBsums + 2 * sb, 2);
                        const __m512i centred = _mm512_sub_epi32(p[t][e], _mm512_set1_epi32(32 * bsum));
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(centred, sc));
                    }
                }
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
        for (int t = 0; t < NT; ++t) {
            float dx;
            std::memcpy(&dx, x + t * static_cast<int64_t>(x_stride) + i * kXBytes, 4);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

// Q8_0_R16 / Q4_0_R16 against Q8_0 tokens (34-byte blocks: fp16 d, 32 codes).
// Q8_0 codes are made unsigned by flipping their sign bit (+128), Q4_0 codes
// are used as stored (q = w + 8); the surplus 128 (or 8) x the sum of the
// token's codes starts each block's int32 sum, so the sums are exact.
template <DType T, int NT>
void legacy_r16_group(int64_t nb, const std::byte* group, const std::byte* x, size_t x_stride, float* out,
                      int64_t out_stride) noexcept {
    constexpr bool kEight = T == DType::Q8_0_R16;
    constexpr int64_t kBlockBytes = kEight ? 16 * 34 : 16 * 18;
    constexpr int kOffset = kEight ? 128 : 8;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kBlockBytes;
        for (int64_t off = 0; off < kBlockBytes; off += 64) __builtin_prefetch(gb + kPrefetchBytes + off, 0, 3);
        __m512i p[NT];
        for (int t = 0; t < NT; ++t) {
            const __m256i codes =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + t * static_cast<int64_t>(x_stride) + i * 34 + 2));
            // Sum of the 32 signed codes: unsigned sums of (code + 128), less 32 x 128.
            const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
            const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
            const auto sum = static_cast<int32_t>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
            p[t] = _mm512_set1_epi32(-kOffset * sum);
        }
        if constexpr (kEight) {
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {
                const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(gb + 32 + 64 * q), _mm512_set1_epi8(-128));
                for (int t = 0; t < NT; ++t)
                    p[t] = _mm512_dpbusd_epi32(p[t], v, bcast32(x + t * static_cast<int64_t>(x_stride) + i * 34 + 2 + 4 * q));
            }
        } else {
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const __m512i v = _mm512_loadu_si512(gb + 32 + 64 * q);
                const __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                for (int t = 0; t < NT; ++t) {
                    const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * 34 + 2 + 4 * q;
                    p[t] = _mm512_dpbusd_epi32(p[t], lo, bcast32(xq));
                    p[t] = _mm512_dpbusd_epi32(p[t], hi, bcast32(xq + 16));
                }
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
        for (int t = 0; t < NT; ++t) {
            uint16_t h;
            std::memcpy(&h, x + t * static_cast<int64_t>(x_stride) + i * 34, 2);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[t]), _mm512_mul_ps(d, _mm512_set1_ps(_cvtsh_ss(h))), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

using GroupFn = void (*)(int64_t, const std::byte*, const std::byte*, size_t, float*, int64_t) noexcept;

template <DType T, size_t... N>
constexpr std::array<GroupFn, sizeof...(N)> group_table(std::index_sequence<N...>) noexcept {
    if constexpr (T == DType::Q6_K_R16) return {q6_k_r16_group<static_cast<int>(N) + 1>...};
    else if constexpr (T == DType::Q8_0_R16 || T == DType::Q4_0_R16)
        return {legacy_r16_group<T, static_cast<int>(N) + 1>...};
    else return {q45_k_r16_group<T, static_cast<int>(N) + 1>...};
}

}  // namespace

bool avx512_interleaved_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                               const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                               const RowClaims* claims) noexcept {
    const bool legacy = type == DType::Q8_0_R16 || type == DType::Q4_0_R16;
    if (legacy && n_tokens >= kLegacyGemmTokens)
        return avx512_quant_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
    if (!legacy && n_tokens >= kGemmTokens)
        return avx512_kquant_gemm(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
    static constexpr auto kQ4 = group_table<DType::Q4_K_R16>(std::make_index_sequence<kMaxTokens>{});
    static constexpr auto kQ6 = group_table<DType::Q6_K_R16>(std::make_index_sequence<kMaxTokens>{});
    static constexpr auto kQ5 = group_table<DType::Q5_K_R16>(std::make_index_sequence<kMaxTokens>{});
    static constexpr auto kQ80 = group_table<DType::Q8_0_R16>(std::make_index_sequence<kMaxTokens>{});
    static constexpr auto kQ40 = group_table<DType::Q4_0_R16>(std::make_index_sequence<kMaxTokens>{});
    const auto& kGroups = type == DType::Q4_K_R16   ? kQ4
                          : type == DType::Q5_K_R16 ? kQ5
                          : type == DType::Q6_K_R16 ? kQ6
                          : type == DType::Q8_0_R16 ? kQ80
                                                    : kQ40;
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    const int64_t nb = k / (legacy ? 32 : 256);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t g = a; g < b; g += kGroupRows) {
            const std::byte* group = wb + g * static_cast<int64_t>(w_stride);
            for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
                const auto nt = static_cast<size_t>(std::min<int64_t>(kMaxTokens, n_tokens - t0));
                kGroups[nt - 1](nb, group, xb + t0 * static_cast<int64_t>(x_stride), x_stride,
                                out + t0 * out_stride + g, out_stride);
            }
        }
    });
    return true;
}

}  // namespace kiln::kernels::detail

#endif  // KILN_HAVE_AVX512_VNNI
