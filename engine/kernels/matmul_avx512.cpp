// The "avx512-vnni" kernel set: 512-bit vectors, F16C/shift conversions for
// F16/BF16 weights, and `vpdpbusd` (u8 x s8 -> s32, four products per lane) for
// Q8_0/Q4_0 weights. Compiled only when the build targets AVX-512 F/BW/VL/VNNI
// (with FMA and F16C), offered only when the CPU reports them.
//
// The float kernels are the shared xsimd templates (matmul_float_simd.h); this
// file supplies their AVX-512 pieces. The int8 kernels live in
// matmul_avx512_quant.cpp.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/simd.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/kernels/matmul_float_simd.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace kiln::kernels::detail {

using Avx512 = xsimd::avx512f;

template <>
struct FloatArch<Avx512> {
    using Batch = xsimd::batch<float, Avx512>;
    // 2 x 12 accumulators + 2 weight vectors + a broadcast: 27 of 32 registers.
    static constexpr int64_t kTileTokens = 12;
    // 256 k steps of a 32-row panel: 32 KiB, L1-resident while the tiles pass.
    static constexpr int64_t kChunk = 256;

    static Batch fma(Batch a, Batch b, Batch c) noexcept { return _mm512_fmadd_ps(a, b, c); }
    static Batch load_f16(const std::byte* p) noexcept {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static Batch load_bf16(const std::byte* p) noexcept {
        // bf16 is the top half of a float: widen to 32 bits and shift into place.
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }

    // 16 x 16 transpose in registers: after it v[j] holds element j of each
    // input row. Four rounds of in-lane and cross-lane shuffles (64 shuffles for
    // 256 floats) instead of 256 scalar moves or 16 gathers.
    static void transpose16(__m512 v[16]) noexcept {
        __m512 t[16], u[16];
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
        }
        // Within every 128-bit lane, u[4g + c] holds column c (of that lane's 4)
        // of rows 4g .. 4g+3.
        for (int g = 0; g < 16; g += 4) {
            u[g + 0] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
            u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
            u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
            u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
        }
        // Gather the 128-bit lanes: column c lives in lane c / 4 of u[4g + c % 4].
        for (int c = 0; c < 4; ++c) {
            const __m512 a0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);       // cols c, c+8 of rows 0-7
            const __m512 a1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);       // cols c+4, c+12 of rows 0-7
            const __m512 b0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);  // the same for rows 8-15
            const __m512 b1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
            v[c] = _mm512_shuffle_f32x4(a0, b0, 0x88);
            v[c + 8] = _mm512_shuffle_f32x4(a0, b0, 0xDD);
            v[c + 4] = _mm512_shuffle_f32x4(a1, b1, 0x88);
            v[c + 12] = _mm512_shuffle_f32x4(a1, b1, 0xDD);
        }
    }

    template <DType W>
    static void pack_panel(const std::byte* w, size_t w_stride, int rows, int64_t k0, int64_t kc,
                           float* panel) noexcept {
        for (int g = 0; g < 2; ++g) {
            int64_t kk = 0;
            for (; kk + 16 <= kc; kk += 16) {
                __m512 v[16];
                for (int i = 0; i < 16; ++i) {
                    const int r = g * 16 + i;
                    v[i] = r < rows ? __m512(load_weights<Avx512, W>(w + r * w_stride, k0 + kk)) : _mm512_setzero_ps();
                }
                transpose16(v);
                for (int j = 0; j < 16; ++j) _mm512_store_ps(panel + (kk + j) * 32 + g * 16, v[j]);
            }
            for (; kk < kc; ++kk)
                for (int i = 0; i < 16; ++i) {
                    const int r = g * 16 + i;
                    panel[kk * 32 + g * 16 + i] = r < rows ? weight_at<W>(w + r * w_stride, k0 + kk) : 0.0f;
                }
        }
    }

    static void pack_tokens(const std::byte* x, size_t x_stride, int nt, int64_t k, float* xp) noexcept {
        static_assert(kTileTokens <= 16);
        constexpr __mmask16 kTile = (1u << kTileTokens) - 1u;
        const auto row = [&](int t) { return reinterpret_cast<const float*>(x + t * x_stride); };
        int64_t kk = 0;
        for (; kk + 16 <= k; kk += 16) {
            __m512 v[16];
            for (int t = 0; t < 16; ++t) v[t] = t < nt ? _mm512_loadu_ps(row(t) + kk) : _mm512_setzero_ps();
            transpose16(v);
            for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(xp + (kk + j) * kTileTokens, kTile, v[j]);
        }
        for (; kk < k; ++kk)
            for (int t = 0; t < kTileTokens; ++t) xp[kk * kTileTokens + t] = t < nt ? row(t)[kk] : 0.0f;
    }
};

namespace {

// Rounds half away from zero, as roundf does (and ggml's reference quantizer):
// truncate, then step one away from zero when the dropped fraction is >= 0.5.
// x - trunc(x) is exact for every float, so this is exact everywhere.
inline __m512 round_half_away(__m512 v) noexcept {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
    return _mm512_mask_add_ps(t, up, t, one);
}

// One Q8_0 block from 32 floats, byte-identical to quant::q8_0_from_float_ref:
// the same d = amax / 127 and id = 1 / d in float, the same x * id products,
// the same rounding. Blocks holding NaN, infinity, or so small that d is not a
// normal float take the reference path itself (its sequential NaN handling and
// its codes for a denormal d are not worth re-deriving in vector form).
void quantize_block_q8_0(const float* x, std::byte* out) noexcept {
    const __m512 v0 = _mm512_loadu_ps(x);
    const __m512 v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const bool nan = (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) != 0;
    if (nan || !(d == 0.0f || (d >= FLT_MIN && d <= FLT_MAX))) {
        quant::q8_0_from_float_ref(x, out, 32);
        return;
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 scale = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v0, scale)));
    const __m512i q1 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v1, scale)));
    const uint16_t dh = _cvtss_sh(d, 0);  // round to nearest even, as fp32_to_fp16
    std::memcpy(out, &dh, 2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 18), _mm512_cvtepi32_epi8(q1));
}

// One Q8_K block from 256 floats, byte-identical to quant::q8_k_from_float_ref:
// the first element of the largest magnitude sets iscale = -127 / max, each
// code is iscale * x rounded to nearest even (vcvtps2dq in the default
// rounding mode, which is ggml's nearest_int at these magnitudes) and capped at
// 127, and each 16 codes are summed. Blocks with a NaN or infinity, or whose
// iscale overflows, take the reference path.
void quantize_block_q8_k(const float* x, std::byte* out) noexcept {
    __m512 v[16];
    __m512 amax_v = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int i = 0; i < 16; ++i) {
        v[i] = _mm512_loadu_ps(x + 16 * i);
        nan |= _mm512_cmp_ps_mask(v[i], v[i], _CMP_UNORD_Q);
        amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(v[i]));
    }
    const float amax = _mm512_reduce_max_ps(amax_v);
    quant::BlockQ8_K block{};
    if (amax == 0.0f && nan == 0) {
        std::memcpy(out, &block, sizeof(block));
        return;
    }
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
        const __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (at != 0) {
            max = x[16 * i + __builtin_ctz(at)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    if (nan != 0 || !(amax <= FLT_MAX) || !(std::fabs(iscale) <= FLT_MAX)) {
        quant::q8_k_from_float_ref(x, out, 256);
        return;
    }
    const __m512 scale = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
        const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], scale)), _mm512_set1_epi32(127));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(block.qs + 16 * i), _mm512_cvtepi32_epi8(q));
        block.bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    block.d = 1.0f / iscale;
    std::memcpy(out, &block, sizeof(block));
}

void avx512_prepare_row(DType weight_type, const float* x, int64_t k, void* out) noexcept {
    assert(matmul_supports(weight_type) && k % type_traits(weight_type).block_size == 0);
    const DType prepared = vec_dot_type(weight_type);
    if (prepared == DType::Q8_K) {
        auto* dst = static_cast<std::byte*>(out);
        for (int64_t b = 0; b < k / 256; ++b) quantize_block_q8_k(x + b * 256, dst + b * sizeof(quant::BlockQ8_K));
        return;
    }
    if (prepared == DType::Q8_1) {
        // The AVX2 set's quantizer (byte-identical to the reference), as its kernels multiply them.
        if (const MatmulKernels* avx2 = avx2_matmul_kernels()) avx2->prepare_row(weight_type, x, k, out);
        else type_traits(prepared).from_float_ref(x, out, k);
        return;
    }
    if (prepared != DType::Q8_0) {
        type_traits(prepared).from_float_ref(x, out, k);  // float activations are copied
        return;
    }
    auto* dst = static_cast<std::byte*>(out);
    for (int64_t b = 0; b < k / 32; ++b) quantize_block_q8_0(x + b * 32, dst + b * 34);
}

void avx512_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                   size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                   const RowClaims* claims) noexcept {
    assert_matmul_args(type, k, r0, r1, n_tokens, out_stride, out);
    if (r0 == r1 || n_tokens == 0) return;
    bool done = false;
    switch (type) {
        case DType::F32:
            done = float_matmul<Avx512, DType::F32>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::F16:
            done = float_matmul<Avx512, DType::F16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::BF16:
            done = float_matmul<Avx512, DType::BF16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q8_0:
        case DType::Q4_0:
            done = avx512_quant_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            done = avx512_kquant_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q8_0_R16:
        case DType::Q4_0_R16:
        case DType::Q4_K_R16:
        case DType::Q5_K_R16:
        case DType::Q6_K_R16:
            done = avx512_interleaved_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride,
                                             claims);
            break;
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::IQ4_NL:
        case DType::IQ4_XS:
        case DType::Q6_K_R16B:  // the avx2 set's layout of Q6_K (this set keeps Q6_K_R16)
            // No 512-bit kernels for these yet: the AVX2 set's (every CPU of this set runs them).
            if (const MatmulKernels* avx2 = avx2_matmul_kernels()) {
                avx2->matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
                done = true;
            }
            break;
        default: break;  // types this set has no kernel for run the scalar reference
    }
    if (!done)
        scalar_matmul_kernels().matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
}

constexpr MatmulKernels kAvx512Vnni{"avx512-vnni", avx512_prepare_row, avx512_matmul,
                                     layout_bits({DType::Q8_0_R16, DType::Q4_0_R16, DType::Q4_K_R16,
                                                  DType::Q5_K_R16, DType::Q6_K_R16})};

}  // namespace

const MatmulKernels* avx512_vnni_matmul_kernels() noexcept {
    static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                                  __builtin_cpu_supports("fma") && cpu_has_f16c();
    return supported ? &kAvx512Vnni : nullptr;
}

}  // namespace kiln::kernels::detail

#else  // !KILN_HAVE_AVX512_VNNI

namespace kiln::kernels::detail {
const MatmulKernels* avx512_vnni_matmul_kernels() noexcept { return nullptr; }
}  // namespace kiln::kernels::detail

#endif
