#pragma once
// Row kernels of the backward pass (the training ops' gradient nodes), xsimd
// in kiln::kernels with plain scalar twins in kiln::kernels::ref, like
// vector.h / vector_ref.h. Each works on one row of n floats; out must not overlap
// the inputs (a graph node never shares memory with its sources).
#include <cstdint>

namespace kiln::kernels {

// out = grad * f'(x), element-wise:
//   relu'(x) = 1 for x > 0, else 0 (torch's choice at 0);
//   gelu (tanh form): 0.5 x (1 + tanh u), u = c (x + 0.044715 x^3), c = sqrt(2/pi), so
//     gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2);
//   gelu_erf'(x) = Phi(x) + x phi(x) = 0.5 erfc(-x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi).
void relu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void gelu_tanh_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void gelu_erf_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
//   silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
void silu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;

// rms_norm's dx (weight may be null: 1): with r = 1 / sqrt(mean(x^2) + eps) and
// d = grad * weight, dx = r d - x r^3 mean(d x).
void rms_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n);

// layer_norm's dx (weight may be null: 1): with xhat = (x - mean) * rstd and
// dxhat = grad * weight, dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
void layer_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n);

// softmax's dx = y * (grad - sum(grad * y)), from the forward's output y.
void softmax_grad(const float* y, const float* grad, float* out, int64_t n);

// Cross-entropy of one row of logits: log sum exp(x) - x[target], with the
// max subtracted first; target must be in [0, n).
float cross_entropy(const float* x, int64_t n, int32_t target);
// Its gradient scaled by the row's upstream gradient: (softmax(x) - onehot(target)) * row_grad.
void cross_entropy_grad(const float* x, int64_t n, int32_t target, float row_grad, float* out);

}  // namespace kiln::kernels

namespace kiln::kernels::ref {

void relu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void gelu_tanh_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void gelu_erf_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void silu_grad(const float* x, const float* grad, float* out, int64_t n) noexcept;
void rms_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n);
void layer_norm_grad(const float* x, const float* weight, const float* grad, float eps, float* out, int64_t n);
void softmax_grad(const float* y, const float* grad, float* out, int64_t n);
float cross_entropy(const float* x, int64_t n, int32_t target);
void cross_entropy_grad(const float* x, int64_t n, int32_t target, float row_grad, float* out);

}  // namespace kiln::kernels::ref
