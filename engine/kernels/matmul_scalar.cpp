// The scalar reference kernel set: the obvious loops, kept beside the SIMD sets
// so that every fast kernel has a plain twin to be tested against.
//
// Float weights: each product is rounded to float (as a float multiply does) and
// summed in double, ggml's scalar vec_dot_f32/f16 convention, so the reference
// itself carries almost no summation error.
//
// Quantized weights follow ggml's vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0 exactly:
// per block of 32 an exact int32 sum of the code products, then one float
// multiply-add per block, sum += sumi * (d_w * d_x), in block order.
#include <cstring>
#include <limits>

#include "engine/core/half.h"
#include "engine/kernels/dot_kquants_ref.h"
#include "engine/kernels/dot_legacy_ref.h"
#include "engine/quant/interleave.h"
#include "engine/kernels/matmul_impl.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace kiln::kernels {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ8_0;

float dot_f32(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    const auto* wf = reinterpret_cast<const float*>(w);
    const auto* xf = reinterpret_cast<const float*>(x);
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(wf[i] * xf[i]);
    return static_cast<float>(sum);
}

template <float (*ToFloat)(uint16_t) noexcept>
float dot_half(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    const auto* xf = reinterpret_cast<const float*>(x);
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) {
        uint16_t h;
        std::memcpy(&h, w + i * 2, 2);
        sum += static_cast<double>(ToFloat(h) * xf[i]);
    }
    return static_cast<float>(sum);
}

// Blocks are read through memcpy: inside a GGUF file they are not 2-byte aligned.
float dot_q8_0(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    const int64_t blocks = k / quant::kQK8_0;
    float sum = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ8_0 wb, xb;
        std::memcpy(&wb, w + b * static_cast<int64_t>(sizeof(BlockQ8_0)), sizeof(wb));
        std::memcpy(&xb, x + b * static_cast<int64_t>(sizeof(BlockQ8_0)), sizeof(xb));
        int32_t sumi = 0;
        for (int j = 0; j < quant::kQK8_0; ++j) sumi += static_cast<int32_t>(wb.qs[j]) * xb.qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d));
    }
    return sum;
}

float dot_q4_0(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    constexpr int kHalf = quant::kQK4_0 / 2;
    const int64_t blocks = k / quant::kQK4_0;
    float sum = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ4_0 wb;
        BlockQ8_0 xb;
        std::memcpy(&wb, w + b * static_cast<int64_t>(sizeof(BlockQ4_0)), sizeof(wb));
        std::memcpy(&xb, x + b * static_cast<int64_t>(sizeof(BlockQ8_0)), sizeof(xb));
        int32_t sumi = 0;
        for (int j = 0; j < kHalf; ++j) {
            const int lo = (wb.qs[j] & 0x0F) - 8;  // element j
            const int hi = (wb.qs[j] >> 4) - 8;    // element j + 16
            sumi += lo * xb.qs[j] + hi * xb.qs[j + kHalf];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d));
    }
    return sum;
}

using DotFn = float (*)(int64_t, const std::byte*, const std::byte*) noexcept;

DotFn dot_for(DType type) noexcept {
    switch (type) {
        case DType::F32: return dot_f32;
        case DType::F16: return dot_half<fp16_to_fp32>;
        case DType::BF16: return dot_half<bf16_to_fp32>;
        case DType::Q8_0: return dot_q8_0;
        case DType::Q4_0: return dot_q4_0;
        case DType::Q2_K: return dot_q2_k_q8_k_ref;
        case DType::Q3_K: return dot_q3_k_q8_k_ref;
        case DType::Q4_K: return dot_q4_k_q8_k_ref;
        case DType::Q5_K: return dot_q5_k_q8_k_ref;
        case DType::Q6_K: return dot_q6_k_q8_k_ref;
        case DType::Q4_1: return dot_q4_1_q8_1_ref;
        case DType::Q5_0: return dot_q5_0_q8_0_ref;
        case DType::Q5_1: return dot_q5_1_q8_1_ref;
        case DType::IQ4_NL: return dot_iq4_nl_q8_0_ref;
        case DType::IQ4_XS: return dot_iq4_xs_q8_k_ref;
        default: return nullptr;
    }
}

// Interleaved weights: each row is put back into its plain bytes and dotted
// by the plain reference, so the results are the plain reference's bits.
void interleaved_matmul(DType weight_type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept {
    const DType plain = quant::plain_type(weight_type);
    const DotFn dot = dot_for(plain);
    const int64_t nb = k / type_traits(plain).block_size;
    const auto block_bytes = static_cast<int64_t>(type_traits(plain).block_bytes);
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    std::byte* row = detail::thread_scratch(w_stride);
    if (row == nullptr) {  // no memory: every output a NaN rather than a wrong number
        detail::for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
            for (int64_t t = 0; t < n_tokens; ++t)
                for (int64_t r = a; r < b; ++r) out[t * out_stride + r] = std::numeric_limits<float>::quiet_NaN();
        });
        return;
    }
    detail::for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; ++r) {
            const int64_t first = r - r % quant::kInterleaveRows;
            const std::byte* group = wb + first * static_cast<int64_t>(w_stride);
            for (int64_t i = 0; i < nb; ++i)
                quant::deinterleaved_block(weight_type, group, k, static_cast<int>(r - first), i, row + i * block_bytes);
            for (int64_t t = 0; t < n_tokens; ++t)
                out[t * out_stride + r] = dot(k, row, xb + t * static_cast<int64_t>(x_stride));
        }
    });
}

void scalar_prepare_row(DType weight_type, const float* x, int64_t k, void* out) noexcept {
    assert(matmul_supports(weight_type) && k % type_traits(weight_type).block_size == 0);
    type_traits(vec_dot_type(weight_type)).from_float_ref(x, out, k);
}

void scalar_matmul(DType weight_type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                   const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                   const RowClaims* claims) noexcept {
    detail::assert_matmul_args(weight_type, k, r0, r1, n_tokens, out_stride, out);
    if (quant::is_interleaved(weight_type)) {
        interleaved_matmul(weight_type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        return;
    }
    const DotFn dot = dot_for(weight_type);
    if (dot == nullptr) return;
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    detail::for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = a; r < b; ++r)
                out[t * out_stride + r] =
                    dot(k, wb + r * static_cast<int64_t>(w_stride), xb + t * static_cast<int64_t>(x_stride));
    });
}

constexpr MatmulKernels kScalar{"scalar", scalar_prepare_row, scalar_matmul};

}  // namespace

const MatmulKernels& scalar_matmul_kernels() noexcept { return kScalar; }

}  // namespace kiln::kernels
