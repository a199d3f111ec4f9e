#pragma once
// AdamW (Loshchilov & Hutter) over one flat buffer of parameters, in the
// order of operations of torch.optim.AdamW: decoupled weight decay
// p *= 1 - lr·wd, moments m, v, bias-corrected step
// p -= lr / (1 - β1^t) · m / (sqrt(v) / sqrt(1 - β2^t) + ε).
// Also the global gradient norm for clipping. Both run on the thread pool.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/runtime/thread_pool.h"

namespace kiln::train {

struct AdamWOptions {
    float beta1 = 0.9f;
    float beta2 = 0.99f;
    float eps = 1e-8f;
    float weight_decay = 0.1f;
};

// A parameter tensor's place in the flat buffer, and whether it is decayed.
struct ParamSegment {
    size_t offset = 0;
    size_t count = 0;
    bool decay = false;
};

class AdamW {
public:
    AdamW(size_t size, AdamWOptions options);

    // One update with the gradients times grad_scale (the clipping factor, as
    // torch multiplies the gradients in place before the step); `step` counts
    // from 1 (the bias correction's t).
    void update(ThreadPool& pool, std::span<float> params, std::span<const float> grads,
                std::span<const ParamSegment> segments, double lr, int64_t step, float grad_scale = 1.0f);

    std::vector<float>& m() noexcept { return m_; }
    std::vector<float>& v() noexcept { return v_; }
    const std::vector<float>& m() const noexcept { return m_; }
    const std::vector<float>& v() const noexcept { return v_; }
    const AdamWOptions& options() const noexcept { return options_; }

private:
    AdamWOptions options_;
    std::vector<float> m_, v_;
};

// sqrt(Σ g²), summed in double.
double global_norm(ThreadPool& pool, std::span<const float> grads);
// g *= factor.
void scale_in_place(ThreadPool& pool, std::span<float> values, float factor);

}  // namespace kiln::train
