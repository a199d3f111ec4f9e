// The K-quant kernels of the "avx512-vnni" set: Q2_K..Q6_K weights against
// Q8_K-prepared activations (ggml's vec_dot_q*_K_q8_K arithmetic, vectorized).
//
// Each weight super-block is unpacked in registers, 64 elements at a time, to
// unsigned codes u in element order (Q3_K and Q6_K carry their -4 / -32 offset
// as +4 / +32 in u), and its sub-block scales to 16 int16 (one per 16
// elements). Per token: vpmaddubsw (u8 codes x s8 activation codes, pairs into
// int16: at most 2 x 63 x 127, no saturation), vpmaddwd by the scales of each
// pair's sub-block (into int32), summed over the 4 chunks: an exact int32 sum
// per lane. The min term (Q2_K, Q4_K, Q5_K) and the offset term (Q3_K, Q6_K)
// are the activations' bsums (sums of 16 codes) times the per-16 mins or
// offset x scales, one vpmaddwd per super-block. The offset term is subtracted
// in int32 (same scale d), the min term in float with dmin. Only the float sum
// over lanes and super-blocks differs from the scalar set's order.
//
// Tiles of 4 rows x up to 4 tokens: a super-block's unpacking (the costly part
// for one token) is shared by the tile's tokens; each row's arithmetic is the
// same whatever tile it is in, so claimed chunks give the bits of one call.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/simd.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

constexpr int64_t kXBytes = 292;  // a Q8_K block: float d, 256 codes, 16 int16 bsums
constexpr int64_t kXCodes = 4, kXBsums = 260;

inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
inline uint32_t u32_at(const std::byte* p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline __m256i load256(const std::byte* p) noexcept { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i srl16(__m256i v, int n) noexcept { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
// Two 32-byte halves as one 512-bit vector (elements in order).
inline __m512i join(__m256i lo, __m256i hi) noexcept { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// A super-block ready for the dot: codes of chunk c (elements 64c .. 64c+63) as
// u8, the 16 per-16 scales, the 16 int16 weights of the bsums term, and the
// float super-scales.
struct Unpacked {
    __m512i codes[4];
    __m256i scales;
    __m256i corr;
    float d, dmin;  // dmin == 0: corr is an offset term in units of d
};

template <DType T>
constexpr int64_t kBlockBytes = T == DType::Q2_K ? 84 : T == DType::Q3_K ? 110 : T == DType::Q4_K ? 144
                                : T == DType::Q5_K ? 176 : 210;

// Q4_K / Q5_K: the 8 six-bit scales and mins (12 packed bytes) as 8 bytes
// each, each repeated for the two 16-element halves of its sub-block.
inline void scales_mins_k4(const std::byte* packed, __m256i& scales, __m256i& mins) noexcept {
    const uint32_t a = u32_at(packed), b = u32_at(packed + 4), c = u32_at(packed + 8);
    const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
    const __m128i sc8 = _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo));
    const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo));
    scales = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc8, sc8));
    mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

template <DType T>
inline void unpack(const std::byte* p, Unpacked& u) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        u.d = half_at(p);
        u.dmin = half_at(p + 2);
        scales_mins_k4(p + 4, u.scales, u.corr);
        const std::byte* qs = p + (T == DType::Q4_K ? 16 : 48);
        [[maybe_unused]] const __m256i qh = T == DType::Q5_K ? load256(p + 16) : _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i q = load256(qs + 32 * c);
            __m512i v = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), low4);
            if constexpr (T == DType::Q5_K) {
                const __m512i h = _mm512_and_si512(join(srl16(qh, 2 * c), srl16(qh, 2 * c + 1)), one);
                v = _mm512_or_si512(v, _mm512_slli_epi16(h, 4));
            }
            u.codes[c] = v;
        }
    } else if constexpr (T == DType::Q6_K) {
        u.d = half_at(p + 208);
        u.dmin = 0.0f;
        u.scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
        u.corr = _mm256_slli_epi16(u.scales, 5);  // 32 x scale
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(p + 64 * h);
            const __m256i qh = load256(p + 128 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(ql, 4 * part), low4);  // part 0: low nibbles
                const __m512i hi = _mm512_and_si512(join(srl16(qh, 4 * part), srl16(qh, 4 * part + 2)), low2);
                u.codes[2 * h + part] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
            }
        }
    } else if constexpr (T == DType::Q3_K) {
        u.d = half_at(p + 108);
        u.dmin = 0.0f;
        // 16 six-bit scales: low nibbles in bytes 0-7, top 2 bits in bytes 8-11.
        const uint32_t a = u32_at(p + 96), b = u32_at(p + 100), t = u32_at(p + 104);
        const uint32_t s0 = (a & 0x0F0F0F0Fu) | ((t & 0x03030303u) << 4);
        const uint32_t s1 = (b & 0x0F0F0F0Fu) | (((t >> 2) & 0x03030303u) << 4);
        const uint32_t s2 = ((a >> 4) & 0x0F0F0F0Fu) | (((t >> 4) & 0x03030303u) << 4);
        const uint32_t s3 = ((b >> 4) & 0x0F0F0F0Fu) | (((t >> 6) & 0x03030303u) << 4);
        const __m128i s8 = _mm_sub_epi8(
            _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1), static_cast<int>(s0)),
            _mm_set1_epi8(32));
        u.scales = _mm256_cvtepi8_epi16(s8);
        u.corr = _mm256_slli_epi16(u.scales, 2);  // 4 x scale
        const __m256i hm = load256(p);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(p + 32 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const int g = 2 * part;  // groups g, g + 1 of 32 elements
                const __m512i lo = _mm512_and_si512(join(srl16(q, 2 * g), srl16(q, 2 * g + 2)), low2);
                const __m512i hb =
                    _mm512_and_si512(join(srl16(hm, 4 * h + g), srl16(hm, 4 * h + g + 1)), one);
                u.codes[2 * h + part] = _mm512_or_si512(lo, _mm512_slli_epi16(hb, 2));
            }
        }
    } else {  // Q2_K
        u.d = half_at(p + 80);
        u.dmin = half_at(p + 82);
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        u.scales = _mm256_cvtepu8_epi16(_mm_and_si128(sm, _mm_set1_epi8(0x0F)));
        u.corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(p + 16 + 32 * h);
            for (int part = 0; part < 2; ++part) {
                const int g = 2 * part;
                u.codes[2 * h + part] = _mm512_and_si512(join(srl16(q, 2 * g), srl16(q, 2 * g + 2)), low2);
            }
        }
    }
}

// Lane i (an int16 pair of elements 64c + 2i, + 1) of chunk c is in sub-block 4c + i / 8.
inline __m512i chunk_scale_index(int c) noexcept {
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(4 * c + i / 8);
    return _mm512_load_si512(idx);
}

template <DType T, int R, int NT>
void kquant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    constexpr bool kHasMin = T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K;
    const __m512i idx[4] = {chunk_scale_index(0), chunk_scale_index(1), chunk_scale_index(2), chunk_scale_index(3)};
    __m512 acc[R][NT];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            const std::byte* ahead = blk + R * static_cast<int64_t>(w_stride);
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(ahead + off, 0, 3);
            Unpacked u;
            unpack<T>(blk, u);
            __m512i sc[4];
            for (int c = 0; c < 4; ++c) sc[c] = _mm512_permutexvar_epi16(idx[c], _mm512_castsi256_si512(u.scales));
            for (int t = 0; t < NT; ++t) {
                const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + i * kXBytes;
                __m512i isum = _mm512_setzero_si512();
                for (int c = 0; c < 4; ++c) {
                    const __m512i xq = _mm512_loadu_si512(xb + kXCodes + 64 * c);
                    isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(u.codes[c], xq), sc[c]));
                }
                const __m256i corr = _mm256_madd_epi16(load256(xb + kXBsums), u.corr);
                float dx;
                std::memcpy(&dx, xb, 4);
                if constexpr (kHasMin) {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(u.d * dx), acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(corr)),
                                                 _mm512_set1_ps(u.dmin * dx), acc[r][t]);
                } else {
                    isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(corr));
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(u.d * dx), acc[r][t]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) out[t * out_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

using TileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;
constexpr int kRows = 4, kTokens = 4;

template <DType T, int R, size_t... N>
constexpr std::array<TileFn, sizeof...(N)> tile_table(std::index_sequence<N...>) noexcept {
    return {kquant_tile<T, R, static_cast<int>(N) + 1>...};
}

template <DType T>
void kquant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                   size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kFull = tile_table<T, kRows>(std::make_index_sequence<kTokens>{});
    static constexpr auto kOne = tile_table<T, 1>(std::make_index_sequence<kTokens>{});
    const int64_t nb = k / 256;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(kTokens, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        float* ot = out + t0 * out_stride;
        int64_t r = r0;
        for (; r + kRows <= r1; r += kRows)
            kFull[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
    }
}

}  // namespace

bool avx512_kquant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                          const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                          const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        switch (type) {
            case DType::Q2_K: kquant_matmul<DType::Q2_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q3_K: kquant_matmul<DType::Q3_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q4_K: kquant_matmul<DType::Q4_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q5_K: kquant_matmul<DType::Q5_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            default: kquant_matmul<DType::Q6_K>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
        }
    });
    return true;
}

}  // namespace kiln::kernels::detail

#endif  // KILN_HAVE_AVX512_VNNI
