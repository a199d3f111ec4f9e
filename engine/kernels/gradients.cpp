// xsimd gradient kernels (see gradients.h); tested against the scalar twins in
// gradients_ref.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "engine/kernels/gradients.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/vector.h"

namespace kiln::kernels {

namespace {

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);

// out[i] = f(x[i], g[i]) for a batch function f; the tail goes through a padded copy.
template <class F>
void map_grad(const float* x, const float* g, float* out, int64_t n, F f) noexcept {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        f(batch::load_unaligned(x + i), batch::load_unaligned(g + i)).store_unaligned(out + i);
    if (i < n) {
        alignas(64) float bx[kLanes] = {};
        alignas(64) float bg[kLanes] = {};
        const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
        std::memcpy(bx, x + i, bytes);
        std::memcpy(bg, g + i, bytes);
        f(batch::load_aligned(bx), batch::load_aligned(bg)).store_aligned(bx);
        std::memcpy(out + i, bx, bytes);
    }
}

// Sum of f(i) over the row: vector lanes for the body, scalars for the tail.
template <class Vec, class One>
float row_sum(int64_t n, Vec vec, One one) {
    batch acc(0.0f);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) acc += vec(i);
    float total = xsimd::hadd(acc);
    for (; i < n; ++i) total += one(i);
    return total;
}

}  // namespace

void relu_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    map_grad(x, g, out, n, [](batch v, batch d) { return xsimd::select(v > batch(0.0f), d, batch(0.0f)); });
}

// The same through sigmoid(z), z = 2u: 0.5 (1 + tanh u) = s, and
// 0.5 (1 - tanh^2 u) du/dx = s (1 - s) dz/dx with s (1 - s) = e / (1 + e)^2,
// e = exp(-|z|), which never overflows (as the forward kernel does).
void gelu_tanh_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    const float k1 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi));
    const float k3 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi) * 0.044715);
    map_grad(x, g, out, n, [k1, k3](batch v, batch d) {
        const batch one(1.0f);
        const batch v2 = v * v;
        const batch z = v * xsimd::fma(batch(k3), v2, batch(k1));
        const batch dz = xsimd::fma(batch(3.0f * k3), v2, batch(k1));
        const batch e = xsimd::exp(-xsimd::abs(z));
        const batch inv = one / (one + e);
        const batch s = xsimd::select(z >= batch(0.0f), inv, e * inv);
        return d * xsimd::fma(v * e * inv * inv, dz, s);
    });
}

void gelu_erf_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    const float neg_inv_sqrt2 = static_cast<float>(-1.0 / std::numbers::sqrt2);
    const float inv_sqrt_2pi = static_cast<float>(1.0 / std::sqrt(2.0 * std::numbers::pi));
    map_grad(x, g, out, n, [=](batch v, batch d) {
        const batch cdf = batch(0.5f) * xsimd::erfc(v * batch(neg_inv_sqrt2));
        const batch pdf = xsimd::exp(batch(-0.5f) * v * v) * batch(inv_sqrt_2pi);
        return d * xsimd::fma(v, pdf, cdf);
    });
}

// s = sigmoid(x) through e = exp(-|x|), so that no exp overflows.
void silu_grad(const float* x, const float* g, float* out, int64_t n) noexcept {
    map_grad(x, g, out, n, [](batch v, batch d) {
        const batch one(1.0f);
        const batch e = xsimd::exp(-xsimd::abs(v));
        const batch inv = one / (one + e);
        const batch s = xsimd::select(v >= batch(0.0f), inv, e * inv);
        return d * s * xsimd::fma(v, one - s, one);
    });
}

// Float lanes, as layer_norm_grad below.
void rms_norm_grad(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    const auto ld = [](const float* p) { return batch::load_unaligned(p); };
    const auto dvec = [&](int64_t i) { return w ? ld(grad + i) * ld(w + i) : ld(grad + i); };
    const auto done = [&](int64_t i) { return w ? grad[i] * w[i] : grad[i]; };
    const float mean_sq = row_sum(n, [&](int64_t i) { return ld(x + i) * ld(x + i); }, [&](int64_t i) { return x[i] * x[i]; }) / n;
    const float dot = row_sum(n, [&](int64_t i) { return dvec(i) * ld(x + i); }, [&](int64_t i) { return done(i) * x[i]; });
    const float r = 1.0f / std::sqrt(mean_sq + eps);
    const float coef = r * r * r * dot / static_cast<float>(n);
    const batch rv(r), cv(coef);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) (rv * dvec(i) - cv * ld(x + i)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = r * done(i) - coef * x[i];
}

// Float lanes: rows are a model's width (hundreds), where float sums lose
// nothing a gradient notices; the test bounds the difference to the reference.
void layer_norm_grad(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    const auto ld = [](const float* p) { return batch::load_unaligned(p); };
    const float mean = row_sum(n, [&](int64_t i) { return ld(x + i); }, [&](int64_t i) { return x[i]; }) / n;
    const batch mv(mean);
    const float var = row_sum(
                          n,
                          [&](int64_t i) {
                              const batch d = ld(x + i) - mv;
                              return d * d;
                          },
                          [&](int64_t i) { return (x[i] - mean) * (x[i] - mean); }) /
                      n;
    const float rstd = 1.0f / std::sqrt(var + eps);
    const batch rv(rstd);
    const auto dvec = [&](int64_t i) { return w ? ld(grad + i) * ld(w + i) : ld(grad + i); };
    const auto done = [&](int64_t i) { return w ? grad[i] * w[i] : grad[i]; };
    const float mean_d = row_sum(n, dvec, done) / n;
    const float mean_dx = row_sum(
                              n, [&](int64_t i) { return dvec(i) * (ld(x + i) - mv) * rv; },
                              [&](int64_t i) { return done(i) * (x[i] - mean) * rstd; }) /
                          n;
    const batch md(mean_d), mdx(mean_dx);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        (rv * (dvec(i) - md - (ld(x + i) - mv) * rv * mdx)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = rstd * (done(i) - mean_d - (x[i] - mean) * rstd * mean_dx);
}

void softmax_grad(const float* y, const float* grad, float* out, int64_t n) {
    const auto ld = [](const float* p) { return batch::load_unaligned(p); };
    const float dot = row_sum(n, [&](int64_t i) { return ld(y + i) * ld(grad + i); }, [&](int64_t i) { return y[i] * grad[i]; });
    const batch dv(dot);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) (ld(y + i) * (ld(grad + i) - dv)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = y[i] * (grad[i] - dot);
}

float cross_entropy(const float* x, int64_t n, int32_t target) {
    float max = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    if (n >= kLanes) {
        batch m(max);
        for (; i + kLanes <= n; i += kLanes) m = xsimd::max(m, batch::load_unaligned(x + i));
        alignas(64) float lanes[kLanes];
        m.store_aligned(lanes);
        max = *std::max_element(lanes, lanes + kLanes);
    }
    for (; i < n; ++i) max = std::max(max, x[i]);
    const batch mv(max);
    batch acc(0.0f);
    i = 0;
    for (; i + kLanes <= n; i += kLanes) acc += xsimd::exp(batch::load_unaligned(x + i) - mv);
    float sum = xsimd::hadd(acc);
    for (; i < n; ++i) sum += std::exp(x[i] - max);
    return max + std::log(sum) - x[target];
}

void cross_entropy_grad(const float* x, int64_t n, int32_t target, float row_grad, float* out) {
    kernels::softmax(x, out, n);
    out[target] -= 1.0f;
    kernels::scale(out, row_grad, out, n);
}

}  // namespace kiln::kernels
