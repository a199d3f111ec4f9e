#include "engine/train/gradient_sync.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

namespace kiln::train {

GradientSync::GradientSync(const ParamModel& model, const TrainGraph& g, const Executor& exec, Collective& ranks,
                           size_t bucket_floats)
    : model_(model), graph_(&g), ranks_(ranks) {
    const auto& tensors = model.tensors();
    // Tensors by the step that finishes their gradient.
    std::vector<std::pair<size_t, size_t>> order;  // (step, tensor)
    for (size_t i = 0; i < tensors.size(); ++i) {
        const size_t step = exec.step_of(g.grads[i]);
        if (step == Executor::npos) late_.tensors.push_back(i);
        else order.emplace_back(step, i);
    }
    std::sort(order.begin(), order.end());
    size_t floats = 0, last_step = 0;
    for (const auto& [step, i] : order) {
        if (buckets_.empty() || floats >= bucket_floats) {
            if (!buckets_.empty()) hooks_.after.push_back(last_step);
            buckets_.emplace_back();
            floats = 0;
        }
        buckets_.back().tensors.push_back(i);
        floats += tensors[i].segment.count;
        last_step = step;
    }
    if (!buckets_.empty()) hooks_.after.push_back(last_step);
    for (Bucket& b : buckets_) {
        size_t n = 0;
        for (size_t i : b.tensors) n += tensors[i].segment.count;
        b.values.resize(n);
        stats_.bytes += n * sizeof(float);
    }
    size_t n = 0;
    for (size_t i : late_.tensors) n += tensors[i].segment.count;
    late_.values.resize(n);
    stats_.bytes += n * sizeof(float);
    stats_.buckets = static_cast<int64_t>(buckets_.size()) + (late_.tensors.empty() ? 0 : 1);
}

void GradientSync::fill(Bucket& b, TrainGraph& g, const std::vector<float>& grads, bool first, float weight) {
    const auto& tensors = model_.tensors();
    float* dst = b.values.data();
    for (size_t i : b.tensors) {
        const ParamSegment& s = tensors[i].segment;
        const float* src = g.graph.node(g.grads[i]).row(0);
        const float* sum = grads.data() + s.offset;
        // weight 0: these rows counted no target (their loss is 0/0).
        for (size_t j = 0; j < s.count; ++j)
            dst[j] = (first ? 0.0f : sum[j]) + (weight == 0.0f ? 0.0f : weight * src[j]);
        dst += s.count;
    }
}

void GradientSync::run(TrainGraph& g, Executor& exec, ThreadPool& pool, std::vector<float>& grads, bool first,
                       float weight) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    hooks_.call = [&](size_t k) {
        fill(buckets_[k], g, grads, first, weight);
        ranks_.start_sum(buckets_[k].values);
        ranks_.progress_sums();
    };
    // KILN_OVERLAP_SUMS=0 starts every sum after backward instead, to measure what the overlap saves.
    static const bool overlap = [] {
        const char* env = std::getenv("KILN_OVERLAP_SUMS");
        return env == nullptr || std::string_view(env) != "0";
    }();
    exec.run(pool, overlap ? &hooks_ : nullptr);
    if (!overlap)
        for (size_t k = 0; k < buckets_.size(); ++k) hooks_.call(k);
    const auto ran = clock::now();
    if (!late_.tensors.empty()) {
        fill(late_, g, grads, first, weight);
        ranks_.start_sum(late_.values);
    }
    ranks_.wait_sums();
    stats_.wait_seconds += std::chrono::duration<double>(clock::now() - ran).count();
    // The sums back into the flat gradients.
    const auto& tensors = model_.tensors();
    const auto scatter = [&](const Bucket& b) {
        const float* src = b.values.data();
        for (size_t t : b.tensors) {
            const ParamSegment& seg = tensors[t].segment;
            std::copy(src, src + seg.count, grads.data() + seg.offset);
            src += seg.count;
        }
    };
    for (const Bucket& b : buckets_) scatter(b);
    scatter(late_);
    stats_.run_seconds += std::chrono::duration<double>(clock::now() - start).count();
    ++stats_.steps;
}

}  // namespace kiln::train
