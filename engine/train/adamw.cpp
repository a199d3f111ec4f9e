#include "engine/train/adamw.h"

#include <cmath>

#include "engine/core/error.h"

namespace kiln::train {

AdamW::AdamW(size_t size, AdamWOptions options) : options_(options), m_(size, 0.0f), v_(size, 0.0f) {}

void AdamW::update(ThreadPool& pool, std::span<float> params, std::span<const float> grads,
                      std::span<const ParamSegment> segments, double lr, int64_t step, float grad_scale) {
    if (params.size() != m_.size() || grads.size() != m_.size())
        fail("adamw", "{} parameters and {} gradients for an optimizer of {}", params.size(), grads.size(), m_.size());
    const AdamWOptions o = options_;
    // As torch: the corrections in double, the per-element arithmetic in float.
    const double bias1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(step));
    const float step_size = static_cast<float>(lr / bias1);
    const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    const float decay = static_cast<float>(1.0 - lr * o.weight_decay);
    pool.run([&](int ith, int nth) {
        for (const ParamSegment& s : segments) {
            const auto [b, e] = split_range(static_cast<int64_t>(s.count), ith, nth);
            float* p = params.data() + s.offset;
            const float* g = grads.data() + s.offset;
            float* m = m_.data() + s.offset;
            float* v = v_.data() + s.offset;
            const float keep = s.decay ? decay : 1.0f;
            for (int64_t i = b; i < e; ++i) {
                const float gi = grad_scale == 1.0f ? g[i] : g[i] * grad_scale;
                p[i] *= keep;
                m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * gi;
                v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * gi * gi;
                const float denom = std::sqrt(v[i]) / bias2_sqrt + o.eps;
                p[i] -= step_size * (m[i] / denom);
            }
        }
    });
}

double global_norm(ThreadPool& pool, std::span<const float> grads) {
    std::vector<double> partial(static_cast<size_t>(pool.size()), 0.0);
    pool.run([&](int ith, int nth) {
        const auto [b, e] = split_range(static_cast<int64_t>(grads.size()), ith, nth);
        double s = 0.0;
        for (int64_t i = b; i < e; ++i) s += static_cast<double>(grads[static_cast<size_t>(i)]) * grads[static_cast<size_t>(i)];
        partial[static_cast<size_t>(ith)] = s;
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return std::sqrt(total);
}

void scale_in_place(ThreadPool& pool, std::span<float> values, float factor) {
    pool.run([&](int ith, int nth) {
        const auto [b, e] = split_range(static_cast<int64_t>(values.size()), ith, nth);
        for (int64_t i = b; i < e; ++i) values[static_cast<size_t>(i)] *= factor;
    });
}

}  // namespace kiln::train
