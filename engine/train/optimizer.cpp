#include "engine/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/error.h"

namespace kiln::train {

Optimizer::Optimizer(ParamModel& model, const OptimizerOptions& options, ThreadPool& pool)
    : model_(model),
      options_(options),
      pool_(pool),
      adam_(model.data().size(), options.adam),
      grads_(model.data().size(), 0.0f) {}

void Optimizer::gather(const Graph& g, const std::vector<NodeId>& grads, bool first, float weight) {
    const auto& tensors = model_.tensors();
    if (grads.size() != tensors.size()) fail("train", "{} gradients for {} tensors", grads.size(), tensors.size());
    pool_.run([&](int ith, int nth) {
        for (size_t i = 0; i < tensors.size(); ++i) {
            const ParamSegment& s = tensors[i].segment;
            const auto [b, e] = split_range(static_cast<int64_t>(s.count), ith, nth);
            const float* src = g.node(grads[i]).row(0);
            float* dst = grads_.data() + s.offset;
            // weight 1 (one process) copies and adds exactly as before.
            if (weight == 0.0f) {
                if (first) std::fill(dst + b, dst + e, 0.0f);
            } else if (weight == 1.0f) {
                if (first) std::memcpy(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
                else for (int64_t j = b; j < e; ++j) dst[j] += src[j];
            } else if (first) {
                for (int64_t j = b; j < e; ++j) dst[j] = weight * src[j];
            } else {
                for (int64_t j = b; j < e; ++j) dst[j] += weight * src[j];
            }
        }
    });
}

StepResult Optimizer::step(double loss_sum, int64_t micro_batches) {
    StepResult r;
    r.loss = loss_sum / static_cast<double>(micro_batches);
    if (micro_batches > 1) scale_in_place(pool_, grads_, 1.0f / static_cast<float>(micro_batches));
    r.grad_norm = global_norm(pool_, grads_);
    const auto show = [](double x) { return std::isnan(x) ? std::string("nan") : fmt::format("{}", x); };
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))
        fail("train", "step {}: the loss is {} (gradient norm {}); stopping before the parameters change", step_ + 1,
             show(r.loss), show(r.grad_norm));
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when
    // that is below 1 (applied inside the update; grads_ keep the raw values).
    float clip = 1.0f;
    if (const double coef = options_.grad_clip / (r.grad_norm + 1e-6); options_.grad_clip > 0.0f && coef < 1.0)
        clip = static_cast<float>(coef);
    r.lr = options_.schedule.at(step_);
    const std::vector<ParamSegment> segments = model_.segments();
    adam_.update(pool_, model_.data(), grads_, segments, r.lr, step_ + 1, clip);
    ++step_;
    return r;
}

}  // namespace kiln::train
