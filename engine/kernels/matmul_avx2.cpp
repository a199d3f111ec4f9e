// The "avx2" kernel set: 256-bit vectors with FMA, F16C conversions for F16
// weights and shifts for BF16, and `vpmaddubsw` int8 dot products for Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (Q4_1 and Q5_1 with a minimum, against Q8_1)
// and IQ4_XS (against Q8_K).
// Compiled when the build targets AVX2 + FMA + F16C, offered when the CPU has them.
//
// The float kernels are the shared xsimd templates (matmul_float_simd.h) with
// the AVX2 pieces below.
//
// The int8 kernel: vpmaddubsw multiplies unsigned by signed bytes and adds
// adjacent pairs into saturating int16. With |w| as the unsigned side and x
// carrying w's sign (vpsignb) a pair sums at most 2 * 128 * 127 = 32512, so it
// never saturates and every block sum is exact (activation codes are in
// [-127, 127], as the Q8_0 quantizer produces). vpmaddwd by ones widens the
// pairs to int32, which are converted and scaled by d_w * d_x per block. For
// decode and small batches there is no packing: tiles of rows x tokens reuse
// each loaded weight block for all tokens of the tile and each activation
// block for all rows. Prompt batches (8 tokens or more) take a GEMM with the
// tokens in the lanes instead (matmul_avx2_block_gemm.cpp).
#include "engine/kernels/matmul_impl.h"
#include "engine/kernels/matmul_avx2_block_gemm.h"
#include "engine/kernels/matmul_avx2_blocks.h"
#include "engine/kernels/matmul_avx2_kquants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/simd.h"

#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/matmul_float_simd.h"
#include "engine/quant/blocks.h"
#include "engine/quant/legacy_quants.h"
#include "engine/quant/reference.h"

namespace kiln::kernels::detail {

using Avx2 = xsimd::fma3<xsimd::avx2>;

template <>
struct FloatArch<Avx2> {
    using Batch = xsimd::batch<float, Avx2>;
    // 2 x 6 accumulators + 2 weight vectors + a broadcast: 15 of 16 registers.
    static constexpr int64_t kTileTokens = 6;
    static constexpr int64_t kChunk = 256;  // a 16-row panel chunk: 16 KiB

    static Batch fma(Batch a, Batch b, Batch c) noexcept { return _mm256_fmadd_ps(a, b, c); }
    static Batch load_f16(const std::byte* p) noexcept {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static Batch load_bf16(const std::byte* p) noexcept {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }

    // 8 x 8 transpose in registers: afterwards v[j] holds element j of each row.
    static void transpose8(__m256 v[8]) noexcept {
        __m256 t[8], u[8];
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
        }
        for (int g = 0; g < 8; g += 4) {
            u[g + 0] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
            u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
            u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
            u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
        }
        for (int c = 0; c < 4; ++c) {
            v[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
            v[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
        }
    }

    template <DType W>
    static void pack_panel(const std::byte* w, size_t w_stride, int rows, int64_t k0, int64_t kc,
                           float* panel) noexcept {
        for (int g = 0; g < 2; ++g) {
            int64_t kk = 0;
            for (; kk + 8 <= kc; kk += 8) {
                __m256 v[8];
                for (int i = 0; i < 8; ++i) {
                    const int r = g * 8 + i;
                    v[i] = r < rows ? __m256(load_weights<Avx2, W>(w + r * w_stride, k0 + kk)) : _mm256_setzero_ps();
                }
                transpose8(v);
                for (int j = 0; j < 8; ++j) _mm256_store_ps(panel + (kk + j) * 16 + g * 8, v[j]);
            }
            for (; kk < kc; ++kk)
                for (int i = 0; i < 8; ++i) {
                    const int r = g * 8 + i;
                    panel[kk * 16 + g * 8 + i] = r < rows ? weight_at<W>(w + r * w_stride, k0 + kk) : 0.0f;
                }
        }
    }

    static void pack_tokens(const std::byte* x, size_t x_stride, int nt, int64_t k, float* xp) noexcept {
        static_assert(kTileTokens <= 8);
        const __m256i tile =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(kTileTokens), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const auto row = [&](int t) { return reinterpret_cast<const float*>(x + t * x_stride); };
        int64_t kk = 0;
        for (; kk + 8 <= k; kk += 8) {
            __m256 v[8];
            for (int t = 0; t < 8; ++t) v[t] = t < nt ? _mm256_loadu_ps(row(t) + kk) : _mm256_setzero_ps();
            transpose8(v);
            for (int j = 0; j < 8; ++j) _mm256_maskstore_ps(xp + (kk + j) * kTileTokens, tile, v[j]);
        }
        for (; kk < k; ++kk)
            for (int t = 0; t < kTileTokens; ++t) xp[kk * kTileTokens + t] = t < nt ? row(t)[kk] : 0.0f;
    }
};

namespace {

using namespace avx2_blocks;

// roundf's half-away-from-zero rounding; see matmul_avx512.cpp.
inline __m256 round_half_away(__m256 v) noexcept {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
    return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

// One Q8_0 block, byte-identical to quant::q8_0_from_float_ref (same d, id,
// products and rounding; NaN/inf/denormal-scale blocks take the reference).
void quantize_block_q8_0(const float* x, std::byte* out) noexcept {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    int nan = 0;
    for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
        nan |= _mm256_movemask_ps(_mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    if (nan != 0 || !(d == 0.0f || (d >= FLT_MIN && d <= FLT_MAX))) {
        quant::q8_0_from_float_ref(x, out, 32);
        return;
    }
    const __m256 scale = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[i], scale)));
    // Codes are in [-127, 127], so the saturating packs are exact; they
    // interleave 128-bit lanes, which the final dword permutation undoes.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i codes = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    const uint16_t dh = _cvtss_sh(d, 0);
    std::memcpy(out, &dh, 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2), codes);
}

// The sums of 8 vectors' lanes, in order.
inline __m256i lane_sums8(const __m256i s[8]) noexcept {
    // After two rounds of pairwise adds, lane j of each 128-bit half holds half
    // of vector j's sum (j = 0-3 from h0, 4-7 from h1).
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

// One Q8_K block from 256 floats, byte-identical to quant::q8_k_from_float_ref
// (the argument is quantize_block_q8_k's in matmul_avx512.cpp): the first
// element of the largest magnitude sets iscale = -127 / max, codes are
// iscale * x rounded to nearest even by vcvtps2dq and capped at 127, bsums sum
// each 16 codes. Blocks with a NaN or infinity, or whose iscale overflows,
// take the reference path.
void quantize_block_q8_k(const float* x, std::byte* out) noexcept {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax_v = _mm256_setzero_ps();
    int nan = 0;
    for (int i = 0; i < 32; ++i) {
        const __m256 v = _mm256_loadu_ps(x + 8 * i);
        nan |= _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        amax_v = _mm256_max_ps(amax_v, _mm256_andnot_ps(sign, v));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax_v), _mm256_extractf128_ps(amax_v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float amax = _mm_cvtss_f32(m);
    quant::BlockQ8_K block{};
    if (amax == 0.0f && nan == 0) {
        std::memcpy(out, &block, sizeof(block));
        return;
    }
    float max = 0.0f;
    for (int i = 0; i < 32; ++i) {
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));
        const int at = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
        if (at != 0) {
            max = x[8 * i + __builtin_ctz(static_cast<unsigned>(at))];
            break;
        }
    }
    const float iscale = -127.0f / max;
    if (nan != 0 || !(amax <= FLT_MAX) || !(std::fabs(iscale) <= FLT_MAX)) {
        quant::q8_k_from_float_ref(x, out, 256);
        return;
    }
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    __m256i sums[16];  // per 16 codes, 8 lanes each
    for (int c = 0; c < 8; ++c) {
        __m256i q[4];
        for (int j = 0; j < 4; ++j)
            q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * j), scale)), cap);
        // Codes are in [-127, 127]: the saturating packs are exact (see quantize_block_q8_0).
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + 32 * c),
                            _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        sums[2 * c] = _mm256_add_epi32(q[0], q[1]);
        sums[2 * c + 1] = _mm256_add_epi32(q[2], q[3]);
    }
    // At most 16 x 127 each, so packing to int16 is exact; it interleaves the
    // two halves' 64-bit quarters, which the permutation undoes.
    const __m256i bsums = _mm256_packs_epi32(lane_sums8(sums), lane_sums8(sums + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.bsums), _mm256_permute4x64_epi64(bsums, 0xD8));
    block.d = 1.0f / iscale;
    std::memcpy(out, &block, sizeof(block));
}

// One Q8_1 block, byte-identical to quant::q8_1_from_float_ref: the scale and
// codes are Q8_0's (the same d = amax / 127, inverse and rounding), and s is
// fp16(d · Σ codes) with the unrounded d, as the reference computes it.
void quantize_block_q8_1(const float* x, std::byte* out) noexcept {
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < 32; ++j) {
        finite = finite && std::isfinite(x[j]);
        amax = std::fmax(amax, std::fabs(x[j]));
    }
    const float d = amax / 127.0f;
    if (!finite || !(d == 0.0f || (d >= FLT_MIN && d <= FLT_MAX))) {
        quant::q8_1_from_float_ref(x, out, 32);
        return;
    }
    std::byte q8_0[34];
    quantize_block_q8_0(x, q8_0);
    std::memcpy(out, q8_0, 2);
    std::memcpy(out + 4, q8_0 + 2, 32);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(q8_0[2 + j]);
    const uint16_t sh = _cvtss_sh(static_cast<float>(sum) * d, 0);
    std::memcpy(out + 2, &sh, 2);
}

void avx2_prepare_row(DType weight_type, const float* x, int64_t k, void* out) noexcept {
    assert(matmul_supports(weight_type) && k % type_traits(weight_type).block_size == 0);
    const DType prepared = vec_dot_type(weight_type);
    if (prepared == DType::Q8_K) {
        auto* dst = static_cast<std::byte*>(out);
        for (int64_t b = 0; b < k / 256; ++b) quantize_block_q8_k(x + b * 256, dst + b * sizeof(quant::BlockQ8_K));
        return;
    }
    if (prepared == DType::Q8_1) {
        auto* dst = static_cast<std::byte*>(out);
        for (int64_t b = 0; b < k / 32; ++b) quantize_block_q8_1(x + b * 32, dst + b * sizeof(quant::BlockQ8_1));
        return;
    }
    if (prepared != DType::Q8_0) {
        type_traits(prepared).from_float_ref(x, out, k);  // float activations are copied
        return;
    }
    auto* dst = static_cast<std::byte*>(out);
    for (int64_t b = 0; b < k / 32; ++b) quantize_block_q8_0(x + b * 32, dst + b * 34);
}

inline float hsum(__m256 v) noexcept {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// out[t * out_stride + r] for R weight rows and T tokens. dx holds the tokens'
// block scales as floats, nb per token; for the types with a minimum, sx holds
// the activation blocks' s (d·Σq) the same way.
template <DType W, int R, int T>
void quant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride,
                const float* dx, const float* sx, float* out, int64_t out_stride) noexcept {
    constexpr int64_t BB = kBlockBytes<W>, XB = kActBytes<W>, XC = kActCodes<W>;
    const __m256i ones = _mm256_set1_epi16(1);
    const std::byte* wr[R];
    const std::byte* xr[T];
    for (int r = 0; r < R; ++r) wr[r] = w + r * w_stride;
    for (int t = 0; t < T; ++t) xr[t] = x + t * x_stride;
    __m256 acc[R][T];
    float minimum[R][T] = {};  // Σ m_w · s_x (Q4_1, Q5_1)
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();

    for (int64_t b = 0; b < nb; ++b) {
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = wr[r] + b * BB;
            // The next tile's row r at this block (see matmul_float_simd.h).
            __builtin_prefetch(blk + R * static_cast<int64_t>(w_stride), 0, 3);
            __builtin_prefetch(blk + R * static_cast<int64_t>(w_stride) + BB - 1, 0, 3);
            const __m256i wv = load_codes<W>(blk);
            const float dw = half_at(blk);
            for (int t = 0; t < T; ++t) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[t] + b * XB + XC));
                __m256i pairs;
                if constexpr (kHasMinimum<W>) {
                    // Unsigned codes (at most 31) times signed ones: pairs stay far from int16's limit.
                    pairs = _mm256_maddubs_epi16(wv, xv);
                    minimum[r][t] += half_at(blk + 2) * sx[t * nb + b];
                } else {
                    pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
                }
                const __m256i sums = _mm256_madd_epi16(pairs, ones);
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(dw * dx[t * nb + b]), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) out[t * out_stride + r] = hsum(acc[r][t]) + minimum[r][t];
}

using QuantTileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, const float*, const float*,
                             float*, int64_t) noexcept;

template <DType W, int R, size_t... T>
constexpr std::array<QuantTileFn, sizeof...(T)> quant_table(std::index_sequence<T...>) noexcept {
    return {quant_tile<W, R, static_cast<int>(T) + 1>...};
}

// One token: 4 rows per tile (4 independent accumulators while streaming).
// Several tokens: 2 rows x 4 tokens (8 accumulators, each weight block used 4
// times, each activation block twice), which fits the 16 registers.
// Scratch for the activations' block scales (and s, for the types with a minimum).
size_t quant_scratch_bytes(DType w, int64_t k, int64_t n_tokens) noexcept {
    const bool minimum = w == DType::Q4_1 || w == DType::Q5_1;
    return static_cast<size_t>(n_tokens * (k / 32)) * sizeof(float) * (minimum ? 2 : 1);
}

template <DType W>
bool quant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                  size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kDecode = quant_table<W, 4>(std::make_index_sequence<1>{});
    static constexpr auto kBatch = quant_table<W, 2>(std::make_index_sequence<4>{});
    static constexpr auto kOne = quant_table<W, 1>(std::make_index_sequence<4>{});
    const int64_t nb = k / 32;
    auto* dx = reinterpret_cast<float*>(thread_scratch(quant_scratch_bytes(W, k, n_tokens)));
    if (dx == nullptr) return false;
    float* sx = dx + n_tokens * nb;  // used by the types with a minimum
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + b * kActBytes<W>;
            dx[t * nb + b] = half_at(xb);
            if constexpr (kHasMinimum<W>) sx[t * nb + b] = half_at(xb + 2);
        }

    const int rows_per_tile = n_tokens == 1 ? 4 : 2;
    const int tokens_per_tile = n_tokens == 1 ? 1 : 4;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tokens_per_tile) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(tokens_per_tile, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        const float* dxt = dx + t0 * nb;
        const float* sxt = sx + t0 * nb;
        float* ot = out + t0 * out_stride;
        const QuantTileFn full = n_tokens == 1 ? kDecode[0] : kBatch[nt - 1];
        int64_t r = r0;
        for (; r + rows_per_tile <= r1; r += rows_per_tile)
            full(nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, dxt, sxt, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, dxt, sxt, ot + r, out_stride);
    }
    return true;
}

// IQ4_XS: super-blocks of 256 in eight sub-blocks of 32, each with a 6-bit
// scale (low 4 bits in scales_l, high 2 in scales_h) less 32, codes looked up
// in IQ4_NL's table. Against Q8_K activations: per sub-block the signed-code
// dot (vpsignb as in quant_tile, pairs at most 2 x 127 x 127) times its scale
// in vpmaddwd; a super-block's int32 lanes reach at most 8 x 2 x 32258 x 32,
// so they are exact, and d_w x d_x scales them once.
template <int R, int T>
void iq4_xs_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr int64_t BB = sizeof(quant::BlockIQ4_XS), XB = sizeof(quant::BlockQ8_K);
    const __m128i table16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIQ4NLValues));
    const __m256i table = _mm256_set_m128i(table16, table16);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = w + r * static_cast<int64_t>(w_stride) + i * BB;
            for (int64_t off = 0; off < BB; off += 64) __builtin_prefetch(blk + R * static_cast<int64_t>(w_stride) + off, 0, 3);
            uint16_t scales_h;
            std::memcpy(&scales_h, blk + 2, 2);
            const auto* scales_l = reinterpret_cast<const uint8_t*>(blk + 4);
            __m256i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            for (int sub = 0; sub < 8; ++sub) {
                const int ls = ((scales_l[sub / 2] >> (4 * (sub % 2))) & 0xF) | (((scales_h >> (2 * sub)) & 3) << 4);
                const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
                const __m256i codes = _mm256_shuffle_epi8(table, unpack_nibbles(blk + 8 + 16 * sub));
                const __m256i magnitude = _mm256_sign_epi8(codes, codes);
                for (int t = 0; t < T; ++t) {
                    const __m256i xq = _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(x + t * static_cast<int64_t>(x_stride) + i * XB + 4 + 32 * sub));
                    const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xq, codes));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, scale));
                }
            }
            const float dw = half_at(blk);
            for (int t = 0; t < T; ++t) {
                float dx;
                std::memcpy(&dx, x + t * static_cast<int64_t>(x_stride) + i * XB, sizeof(float));
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(dw * dx), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) out[t * out_stride + r] = hsum(acc[r][t]);
}

using Iq4XsTileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;

template <int R, size_t... T>
constexpr std::array<Iq4XsTileFn, sizeof...(T)> iq4_xs_table(std::index_sequence<T...>) noexcept {
    return {iq4_xs_tile<R, static_cast<int>(T) + 1>...};
}

// The tiling of quant_matmul: 4 rows for one token, 2 rows x 4 tokens for more.
void iq4_xs_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                   size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kDecode = iq4_xs_table<4>(std::make_index_sequence<1>{});
    static constexpr auto kBatch = iq4_xs_table<2>(std::make_index_sequence<4>{});
    static constexpr auto kOne = iq4_xs_table<1>(std::make_index_sequence<4>{});
    const int64_t nb = k / 256;
    const int rows_per_tile = n_tokens == 1 ? 4 : 2;
    const int tokens_per_tile = n_tokens == 1 ? 1 : 4;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tokens_per_tile) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(tokens_per_tile, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        float* ot = out + t0 * out_stride;
        const Iq4XsTileFn full = n_tokens == 1 ? kDecode[0] : kBatch[nt - 1];
        int64_t r = r0;
        for (; r + rows_per_tile <= r1; r += rows_per_tile)
            full(nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
        for (; r < r1; ++r) kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, ot + r, out_stride);
    }
}

void avx2_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                 size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    assert_matmul_args(type, k, r0, r1, n_tokens, out_stride, out);
    if (r0 == r1 || n_tokens == 0) return;
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    bool done = false;
    switch (type) {
        case DType::F32:
            done = float_matmul<Avx2, DType::F32>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::F16:
            done = float_matmul<Avx2, DType::F16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::BF16:
            done = float_matmul<Avx2, DType::BF16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::IQ4_NL:
            if (n_tokens >= kBlockGemmMinTokens) {
                // Prompt batches: the GEMM (its scratch is taken before any chunk is claimed).
                done = avx2_block_gemm(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
                break;
            }
            // Scratch first (it never shrinks): no chunk's call can fail after chunks were claimed.
            if (thread_scratch(quant_scratch_bytes(type, k, n_tokens)) == nullptr) break;
            done = true;
            for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
                const auto run = [&]<DType W>() { quant_matmul<W>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); };
                switch (type) {
                    case DType::Q8_0: run.template operator()<DType::Q8_0>(); break;
                    case DType::Q4_0: run.template operator()<DType::Q4_0>(); break;
                    case DType::Q4_1: run.template operator()<DType::Q4_1>(); break;
                    case DType::Q5_0: run.template operator()<DType::Q5_0>(); break;
                    case DType::Q5_1: run.template operator()<DType::Q5_1>(); break;
                    default: run.template operator()<DType::IQ4_NL>(); break;
                }
            });
            break;
        case DType::IQ4_XS:
            done = true;
            for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
                iq4_xs_matmul(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride);
            });
            break;
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            done = avx2_kquant_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q4_K_R16:
        case DType::Q5_K_R16:
        case DType::Q6_K_R16:
        case DType::Q6_K_R16B:
        case DType::Q8_0_R16:
        case DType::Q4_0_R16:
            done = avx2_interleaved_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        default: break;  // types this set has no kernel for run the scalar reference
    }
    if (!done)
        scalar_matmul_kernels().matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
}

// Loaded interleaved: every type with an interleaved layout (Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K). With their software prefetch the interleaved decode kernels
// beat the plain tiles streaming from DRAM on an AVX2 EPYC (1.1B files, tg32,
// against the build that interleaved Q4_0 and Q4_K alone and had no prefetch,
// two rounds: 1 thread Q8_0 12.2/11.7 -> 15.4/13.8 t/s, Q5_K_M 14.1/14.6 ->
// 16.9/15.2, Q6_K 12.0/11.3 -> 12.1/12.5, Q4_0 20.5/21.1 -> 22.5/24.7; 2
// threads Q6_K 18.3 -> 22.8, Q8_0 20.1 -> 23.7). Without the prefetch the
// Q8_0, Q5_K and Q6_K ones had been slower than the plain tiles. Q6_K loads as
// Q6_K_R16B, whose codes unpack in fewer instructions than Q6_K_R16's (the
// avx512-vnni set keeps Q6_K_R16): tg32 at 1 thread, 1.1B Q6_K 12.2 -> 19.4
// t/s (53% -> 95% of the read bandwidth) with the spread prefetches.
constexpr MatmulKernels kAvx2{"avx2", avx2_prepare_row, avx2_matmul,
                              layout_bits({DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16, DType::Q5_K_R16,
                                           DType::Q6_K_R16B})};

}  // namespace

const MatmulKernels* avx2_matmul_kernels() noexcept {
    static const bool supported =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    return supported ? &kAvx2 : nullptr;
}

}  // namespace kiln::kernels::detail

#else

namespace kiln::kernels::detail {
const MatmulKernels* avx2_matmul_kernels() noexcept { return nullptr; }
}  // namespace kiln::kernels::detail

#endif
