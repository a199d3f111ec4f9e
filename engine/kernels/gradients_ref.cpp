// Plain scalar twins of the gradient kernels in gradients.h, the yardstick the
// xsimd versions are tested against: sums and transcendental functions in
// double, rounded to float once (see vector_ref.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "engine/kernels/gradients.h"

namespace kiln::kernels::ref {

// relu'(x) = 1 for x > 0, else 0 (torch's choice at 0).
void relu_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? g[i] : 0.0f;
}

// gelu(x) = 0.5 x (1 + tanh u), u = c (x + 0.044715 x^3), c = sqrt(2/pi):
// gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2).
void gelu_tanh_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double t = std::tanh(c * (v + 0.044715 * v * v * v));
        const double d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
        out[i] = static_cast<float>(d * g[i]);
    }
}

void silu_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double s = 1.0 / (1.0 + std::exp(-v));
        out[i] = static_cast<float>(g[i] * s * (1.0 + v * (1.0 - s)));
    }
}

void rms_norm_grad(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    double squares = 0.0, dot = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        squares += static_cast<double>(x[i]) * x[i];
        dot += static_cast<double>(grad[i]) * (w ? w[i] : 1.0f) * x[i];
    }
    const double r = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
    const double coef = r * r * r * dot / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(r * static_cast<double>(grad[i]) * (w ? w[i] : 1.0f) - coef * x[i]);
}

// gelu_erf'(x) = Phi(x) + x phi(x) = 0.5 erfc(-x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi).
void gelu_erf_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::numbers::pi);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double d = 0.5 * std::erfc(-v / std::numbers::sqrt2) + v * std::exp(-0.5 * v * v) * inv_sqrt_2pi;
        out[i] = static_cast<float>(d * g[i]);
    }
}

void layer_norm_grad(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    double mean = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += x[i];
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= static_cast<double>(n);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double sum_d = 0.0, sum_dx = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(grad[i]) * (w ? w[i] : 1.0f);
        sum_d += d;
        sum_dx += d * (x[i] - mean) * rstd;
    }
    const double mean_d = sum_d / static_cast<double>(n), mean_dx = sum_dx / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(grad[i]) * (w ? w[i] : 1.0f);
        out[i] = static_cast<float>(rstd * (d - mean_d - (x[i] - mean) * rstd * mean_dx));
    }
}

void softmax_grad(const float* y, const float* grad, float* out, int64_t n) {
    double dot = 0.0;
    for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(y[i]) * grad[i];
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(y[i] * (grad[i] - dot));
}

// loss = log Σ exp(x) - x[target], with the max subtracted first.
float cross_entropy(const float* x, int64_t n, int32_t target) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max<double>(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
    return static_cast<float>(max + std::log(sum) - x[target]);
}

// d loss_r / d x = (softmax(x) - onehot(target)) * row_grad[r].
void cross_entropy_grad(const float* x, int64_t n, int32_t target, float row_grad, float* out) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max<double>(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
    for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>((std::exp(x[i] - max) / sum - (i == target ? 1.0 : 0.0)) * row_grad);
}

}  // namespace kiln::kernels::ref
