// Scalar reference row kernels (see vector_ref.h). Each loop is the textbook
// formula evaluated in double; a result is rounded to float only when stored.
// Where a textbook formula loses accuracy in double too, the mathematically
// identical stable form is used instead, and the comment says why.
#include "engine/kernels/vector_ref.h"

#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>

namespace kiln::kernels::ref {

namespace {

// x / (1 + e^-x). In double, e^-x overflows to +inf only for x < -709, where
// the quotient correctly becomes -0 (the true value underflows float anyway).
double silu_of(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

void add(const float* a, const float* b, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];  // one float rounding: already exact-as-can-be
}

void mul(const float* a, const float* b, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void scale(const float* x, float s, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void softcap(const float* x, float cap, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void relu(const float* x, float* out, int64_t n) noexcept {
    // x < 0 is false for NaN, so NaN passes through (as torch.relu does) and
    // shows up downstream instead of being silently zeroed.
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void silu(const float* x, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(silu_of(x[i]));
}

void gelu_tanh(const float* x, float* out, int64_t n) noexcept {
    // GPT-2's formula, literally: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    const double c = std::sqrt(2.0 / std::numbers::pi);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double u = c * (v + 0.044715 * v * v * v);
        out[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(u)));
    }
}

void gelu_erf(const float* x, float* out, int64_t n) noexcept {
    // 0.5 x (1 + erf(x / sqrt 2)) written as 0.5 x erfc(-x / sqrt 2): the same
    // function, but 1 + erf(t) cancels catastrophically for t << 0 even in
    // double (at x = -8 it keeps only one significant digit), erfc does not.
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        out[i] = static_cast<float>(0.5 * v * std::erfc(-v / std::sqrt(2.0)));
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(silu_of(gate[i]) * static_cast<double>(up[i]));
}

float dot(const float* a, const float* b, int64_t n) noexcept {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(s);
}

void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
        const double w = weight ? weight[i] : 1.0;
        out[i] = static_cast<float>(x[i] * inv * w);
    }
}

void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    // Two passes (mean, then the mean of squared deviations): the one-pass
    // E[x^2] - E[x]^2 cancels badly when |mean| >> std, even in double.
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(n);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
        const double w = weight ? weight[i] : 1.0;
        const double b = bias ? bias[i] : 0.0;
        out[i] = static_cast<float>((x[i] - mean) * inv * w + b);
    }
}

void softmax(const float* x, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    // The largest entry is one of the floats, so it is found in float (exactly);
    // the same loop over doubles crashes GCC 12's aarch64 vectorizer (an
    // internal compiler error in vect_transform_reduction).
    float largest = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) largest = std::fmax(largest, x[i]);
    const double max = largest;
    if (max == -std::numeric_limits<double>::infinity()) {
        // Every entry is -inf (a fully masked row): zeros, the same convention
        // as attend's fully masked query, rather than 0/0 = NaN.
        for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
        return;
    }
    // Subtracting the maximum keeps every exponent <= 0: no overflow, and the
    // largest term is exactly 1 so the sum is >= 1.
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::exp(x[i] - max) / sum);
}

void rope(float* x, const RopeSpec& s, int64_t pos, const float* freq_factors) noexcept {
    assert(s.n_rot % 2 == 0 && s.n_rot <= s.head_dim);
    const YarnRange range = yarn_range(s);
    const double magnitude = rope_magnitude(s);
    const int64_t half = s.n_rot / 2;
    for (int64_t h = 0; h < s.n_heads; ++h) {
        float* head = x + h * s.head_dim;
        for (int64_t i = 0; i < half; ++i) {
            // The angle in double: in float, pos * freq for pos in the
            // thousands is off by ~1e-4 rad, far more than a float rounding.
            double theta = static_cast<double>(pos) *
                           std::pow(static_cast<double>(s.freq_base), -2.0 * static_cast<double>(i) / s.n_rot);
            if (freq_factors != nullptr) theta /= freq_factors[i];
            theta = scaled_rope_angle(s, range, i, theta);
            const double c = std::cos(theta) * magnitude;
            const double sn = std::sin(theta) * magnitude;
            const int64_t a = s.style == RopeStyle::Neox ? i : 2 * i;
            const int64_t b = s.style == RopeStyle::Neox ? i + half : 2 * i + 1;
            const double x0 = head[a];
            const double x1 = head[b];
            head[a] = static_cast<float>(x0 * c - x1 * sn);
            head[b] = static_cast<float>(x0 * sn + x1 * c);
        }
    }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base) noexcept {
    rope(x, RopeSpec{.n_heads = n_heads, .head_dim = head_dim, .n_rot = n_rot, .freq_base = freq_base}, pos, nullptr);
}

}  // namespace kiln::kernels::ref
