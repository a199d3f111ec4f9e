// The "neon" kernel set (aarch64): 128-bit NEON vectors for F32, F16 and BF16
// weights, and int8 block dot products for Q8_0 and Q4_0 (against Q8_0
// activations). Compiled with __ARM_FEATURE_DOTPROD (-march=armv8.2-a+dotprod)
// the same source is the "neon-dotprod" set, whose int8 products use `sdot`;
// compiled with __ARM_FEATURE_MATMUL_INT8 too (+dotprod+i8mm), the
// "neon-i8mm" set, whose Q8_0 and Q4_0 products of 2 tokens or more take the
// SMMLA GEMM of matmul_neon_i8mm.cpp (the kernel targets of those names,
// engine/kernels/targets.cmake). The K-quants are in matmul_neon_kquants.cpp;
// every other type runs the scalar reference.
//
// The float kernels are the shared xsimd templates (matmul_float_simd.h) with
// the NEON pieces below.
//
// The int8 kernel: per block of 32, the exact int32 sum of the code products
// (four lanes of partial sums, matmul_neon_dot.h), converted to float and
// scaled by d_w * d_x into a float vector accumulator; the lanes are summed
// once at the end, as the AVX2 set does.
#include "engine/kernels/matmul_impl.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include "engine/kernels/simd.h"

#include <array>
#include <cfloat>
#include <cstring>
#include <utility>

#include "engine/core/half.h"
#include "engine/kernels/matmul_float_simd.h"
#include "engine/kernels/matmul_neon_blocks.h"
#include "engine/kernels/matmul_neon_dot.h"
#include "engine/kernels/matmul_neon_i8mm.h"
#include "engine/kernels/matmul_neon_kquants.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace kiln::kernels::detail {

using Neon = xsimd::neon64;

template <>
struct FloatArch<Neon> {
    using Batch = xsimd::batch<float, Neon>;
    // 2 x 8 accumulators, 2 weight vectors and the token broadcasts fit the
    // 32 vector registers.
    static constexpr int64_t kTileTokens = 8;
    static constexpr int64_t kChunk = 256;  // an 8-row panel chunk: 8 KiB

    static Batch fma(Batch a, Batch b, Batch c) noexcept { return vfmaq_f32(c, a, b); }
    // Loaded as bytes: weights inside a GGUF file need not be 2-byte aligned.
    static Batch load_f16(const std::byte* p) noexcept {
        return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(reinterpret_cast<const uint8_t*>(p))));
    }
    static Batch load_bf16(const std::byte* p) noexcept {
        const uint16x4_t h = vreinterpret_u16_u8(vld1_u8(reinterpret_cast<const uint8_t*>(p)));
        return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    }

    // 4 x 4 transpose in registers: afterwards v[j] holds element j of each row.
    static void transpose4(float32x4_t v[4]) noexcept {
        const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(v[0], v[1]));  // a0 b0 a2 b2
        const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(v[0], v[1]));  // a1 b1 a3 b3
        const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(v[2], v[3]));  // c0 d0 c2 d2
        const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(v[2], v[3]));  // c1 d1 c3 d3
        v[0] = vreinterpretq_f32_f64(vtrn1q_f64(t0, t2));
        v[1] = vreinterpretq_f32_f64(vtrn1q_f64(t1, t3));
        v[2] = vreinterpretq_f32_f64(vtrn2q_f64(t0, t2));
        v[3] = vreinterpretq_f32_f64(vtrn2q_f64(t1, t3));
    }

    template <DType W>
    static void pack_panel(const std::byte* w, size_t w_stride, int rows, int64_t k0, int64_t kc,
                           float* panel) noexcept {
        for (int g = 0; g < 2; ++g) {
            int64_t kk = 0;
            for (; kk + 4 <= kc; kk += 4) {
                float32x4_t v[4];
                for (int i = 0; i < 4; ++i) {
                    const int r = g * 4 + i;
                    v[i] = r < rows ? float32x4_t(load_weights<Neon, W>(w + r * w_stride, k0 + kk)) : vdupq_n_f32(0.0f);
                }
                transpose4(v);
                for (int j = 0; j < 4; ++j) vst1q_f32(panel + (kk + j) * 8 + g * 4, v[j]);
            }
            for (; kk < kc; ++kk)
                for (int i = 0; i < 4; ++i) {
                    const int r = g * 4 + i;
                    panel[kk * 8 + g * 4 + i] = r < rows ? weight_at<W>(w + r * w_stride, k0 + kk) : 0.0f;
                }
        }
    }

    static void pack_tokens(const std::byte* x, size_t x_stride, int nt, int64_t k, float* xp) noexcept {
        static_assert(kTileTokens == 8);
        const auto row = [&](int t) { return reinterpret_cast<const float*>(x + t * x_stride); };
        for (int g = 0; g < 2; ++g) {
            int64_t kk = 0;
            for (; kk + 4 <= k; kk += 4) {
                float32x4_t v[4];
                for (int i = 0; i < 4; ++i) {
                    const int t = g * 4 + i;
                    v[i] = t < nt ? vld1q_f32(row(t) + kk) : vdupq_n_f32(0.0f);
                }
                transpose4(v);
                for (int j = 0; j < 4; ++j) vst1q_f32(xp + (kk + j) * kTileTokens + g * 4, v[j]);
            }
            for (; kk < k; ++kk)
                for (int i = 0; i < 4; ++i) {
                    const int t = g * 4 + i;
                    xp[kk * kTileTokens + t] = t < nt ? row(t)[kk] : 0.0f;
                }
        }
    }
};

namespace {

using neon::Codes;
using neon::half_at;
using neon::load_activation;
using neon::load_codes;

// One Q8_0 block, byte-identical to quant::q8_0_from_float_ref: the same
// d = amax / 127 and id = 1 / d, each code x * id rounded half away from zero
// (vcvtaq is roundf's rounding), d stored by the same fp32_to_fp16. Blocks with
// a NaN or infinity, or a scale whose inverse overflows, take the reference path.
void quantize_block_q8_0(const float* x, std::byte* out) noexcept {
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    uint32x4_t finite = vdupq_n_u32(~0u);
    const float32x4_t largest = vdupq_n_f32(FLT_MAX);
    for (int i = 0; i < 8; ++i) {
        v[i] = vld1q_f32(x + 4 * i);
        const float32x4_t a = vabsq_f32(v[i]);
        finite = vandq_u32(finite, vcleq_f32(a, largest));  // false for NaN and infinity
        amax = vmaxq_f32(amax, a);
    }
    const float d = vmaxvq_f32(amax) / 127.0f;
    if (vminvq_u32(finite) == 0 || !(d == 0.0f || d >= FLT_MIN)) {
        quant::q8_0_from_float_ref(x, out, 32);
        return;
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int8x8_t codes[4];
    for (int i = 0; i < 4; ++i) {
        const int32x4_t lo = vcvtaq_s32_f32(vmulq_n_f32(v[2 * i], id));
        const int32x4_t hi = vcvtaq_s32_f32(vmulq_n_f32(v[2 * i + 1], id));
        codes[i] = vqmovn_s16(vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi)));  // exact: codes are in [-127, 127]
    }
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(out, &dh, 2);
    auto* qs = reinterpret_cast<int8_t*>(out + 2);
    vst1q_s8(qs, vcombine_s8(codes[0], codes[1]));
    vst1q_s8(qs + 16, vcombine_s8(codes[2], codes[3]));
}

void neon_prepare_row(DType weight_type, const float* x, int64_t k, void* out) noexcept {
    assert(matmul_supports(weight_type) && k % type_traits(weight_type).block_size == 0);
    const DType prepared = vec_dot_type(weight_type);
    if (prepared != DType::Q8_0) {
        // Float activations are copied; Q8_1 and Q8_K come from the reference.
        type_traits(prepared).from_float_ref(x, out, k);
        return;
    }
    auto* dst = static_cast<std::byte*>(out);
    for (int64_t b = 0; b < k / 32; ++b) quantize_block_q8_0(x + b * 32, dst + b * sizeof(quant::BlockQ8_0));
}

// Four int32 lanes whose sum is the block's exact Σ w_j · x_j.
inline int32x4_t block_dot(Codes w, Codes x) noexcept {
    return neon::dot16(neon::dot16(vdupq_n_s32(0), w.lo, x.lo), w.hi, x.hi);
}

// out[t * out_stride + r] for R weight rows and T tokens; dx holds the tokens'
// block scales as floats, nb per token.
template <DType W, int R, int T>
void quant_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* x, size_t x_stride,
                const float* dx, float* out, int64_t out_stride) noexcept {
    constexpr int64_t BB = neon::kBlockBytes<W>;
    constexpr int64_t XB = sizeof(quant::BlockQ8_0);
    const std::byte* wr[R];
    const std::byte* xr[T];
    for (int r = 0; r < R; ++r) wr[r] = w + r * w_stride;
    for (int t = 0; t < T; ++t) xr[t] = x + t * x_stride;
    float32x4_t acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);

    for (int64_t b = 0; b < nb; ++b) {
        Codes xv[T];
        for (int t = 0; t < T; ++t) xv[t] = load_activation(xr[t] + b * XB);
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = wr[r] + b * BB;
            // The next tile's row r at this block (see matmul_float_simd.h).
            __builtin_prefetch(blk + R * static_cast<int64_t>(w_stride), 0, 3);
            const Codes wv = load_codes<W>(blk);
            const float dw = half_at(blk);
            for (int t = 0; t < T; ++t)
                acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(block_dot(wv, xv[t])), dw * dx[t * nb + b]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) out[t * out_stride + r] = vaddvq_f32(acc[r][t]);
}

using QuantTileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, const float*, float*,
                             int64_t) noexcept;

template <DType W, int R, size_t... T>
constexpr std::array<QuantTileFn, sizeof...(T)> quant_table(std::index_sequence<T...>) noexcept {
    return {quant_tile<W, R, static_cast<int>(T) + 1>...};
}

size_t quant_scratch_bytes(int64_t k, int64_t n_tokens) noexcept {
    return static_cast<size_t>(n_tokens * (k / 32)) * sizeof(float);
}

// One token: 4 rows per tile (4 independent accumulators while streaming).
// Several tokens: 4 rows x 4 tokens (16 accumulators; each weight block is
// used 4 times, each activation block 4 times), which the 32 registers hold.
// A row's arithmetic is the same in every tile shape, so results do not depend
// on how the rows were split.
template <DType W>
void quant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                  size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, float* dx) noexcept {
    static constexpr auto kDecode = quant_table<W, 4>(std::make_index_sequence<1>{});
    static constexpr auto kBatch = quant_table<W, 4>(std::make_index_sequence<4>{});
    static constexpr auto kOne = quant_table<W, 1>(std::make_index_sequence<4>{});
    const int64_t nb = k / 32;
    const int tokens_per_tile = n_tokens == 1 ? 1 : 4;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tokens_per_tile) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(tokens_per_tile, n_tokens - t0));
        const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
        const float* dxt = dx + t0 * nb;
        float* ot = out + t0 * out_stride;
        const QuantTileFn full = n_tokens == 1 ? kDecode[0] : kBatch[nt - 1];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4)
            full(nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, dxt, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, x_stride, dxt, ot + r, out_stride);
    }
}

void neon_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                 size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    assert_matmul_args(type, k, r0, r1, n_tokens, out_stride, out);
    if (r0 == r1 || n_tokens == 0) return;
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    bool done = false;
    switch (type) {
        case DType::F32:
            done = float_matmul<Neon, DType::F32>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::F16:
            done = float_matmul<Neon, DType::F16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::BF16:
            done = float_matmul<Neon, DType::BF16>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            break;
        case DType::Q8_0:
        case DType::Q4_0: {
#if defined(__ARM_FEATURE_MATMUL_INT8)
            // Prompt batches: the SMMLA GEMM (matmul_neon_i8mm.cpp); one token keeps the tiles below.
            if (n_tokens >= kI8mmMinTokens) {
                done = neon_i8mm_matmul(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
                break;
            }
#endif
            // Scratch first (it never shrinks): no chunk's call can fail after chunks were claimed.
            auto* dx = reinterpret_cast<float*>(thread_scratch(quant_scratch_bytes(k, n_tokens)));
            if (dx == nullptr) break;
            const int64_t nb = k / 32;
            for (int64_t t = 0; t < n_tokens; ++t)
                for (int64_t b = 0; b < nb; ++b)
                    dx[t * nb + b] = half_at(xb + t * static_cast<int64_t>(x_stride) + b * sizeof(quant::BlockQ8_0));
            done = true;
            for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
                if (type == DType::Q8_0)
                    quant_matmul<DType::Q8_0>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride, dx);
                else
                    quant_matmul<DType::Q4_0>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride, dx);
            });
            break;
        }
        case DType::Q4_K:
        case DType::Q6_K:
            neon_kquant_matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
            done = true;
            break;
        default: break;  // types this set has no kernel for run the scalar reference
    }
    if (!done)
        scalar_matmul_kernels().matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
}

#if defined(__ARM_FEATURE_MATMUL_INT8) && defined(__ARM_FEATURE_DOTPROD)
constexpr MatmulKernels kNeon{"neon-i8mm", neon_prepare_row, neon_matmul};
#elif defined(__ARM_FEATURE_DOTPROD)
constexpr MatmulKernels kNeon{"neon-dotprod", neon_prepare_row, neon_matmul};
#else
constexpr MatmulKernels kNeon{"neon", neon_prepare_row, neon_matmul};
#endif

}  // namespace

// The "neon-dotprod" kernel target is chosen only on a CPU with sdot, the
// "neon-i8mm" one only on a CPU with sdot and SMMLA (kernel_targets.cpp), and
// NEON is part of every aarch64 CPU.
const MatmulKernels* neon_matmul_kernels() noexcept { return &kNeon; }

}  // namespace kiln::kernels::detail

#else

namespace kiln::kernels::detail {
const MatmulKernels* neon_matmul_kernels() noexcept { return nullptr; }
}  // namespace kiln::kernels::detail

#endif
