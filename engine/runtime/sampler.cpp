#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace kiln {

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
    candidates_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};

    for (const LogitBias& b : params_.logit_bias)
        if (b.token >= 0 && static_cast<size_t>(b.token) < candidates_.size())
            candidates_[static_cast<size_t>(b.token)].logit += b.bias;

    // Each recent token: the repetition penalty once however often it
    // occurred, then the additive ones (as llama.cpp's penalties sampler).
    const bool penalties =
        params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    if (penalties && params_.repeat_last_n != 0) {
        const size_t window = params_.repeat_last_n < 0 ? recent.size()
                                                        : std::min(recent.size(), size_t(params_.repeat_last_n));
        std::unordered_map<int32_t, int> count;
        for (auto it = recent.end() - static_cast<std::ptrdiff_t>(window); it != recent.end(); ++it) ++count[*it];
        for (const auto& [id, n] : count) {
            if (id < 0 || static_cast<size_t>(id) >= candidates_.size()) continue;
            float& l = candidates_[static_cast<size_t>(id)].logit;
            if (params_.repeat_penalty != 1.0f) l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
            l -= static_cast<float>(n) * params_.frequency_penalty + params_.presence_penalty;
        }
    }

    // Highest logit first; ties by lower id, so the order is fully determined.
    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    if (params_.temperature <= 0.0f)
        return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;

    size_t keep = candidates_.size();
    if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                      by_logit);
    candidates_.resize(keep);

    // Probabilities before temperature, as in llama.cpp's chain (filters, then temperature).
    auto softmax = [&](float temperature) {
        probs_.resize(candidates_.size());
        const double top = candidates_[0].logit;
        double sum = 0;
        for (size_t i = 0; i < candidates_.size(); ++i) {
            probs_[i] = std::exp((candidates_[i].logit - top) / temperature);
            sum += probs_[i];
        }
        for (double& p : probs_) p /= sum;
    };
    softmax(1.0f);
    if (params_.top_p < 1.0f) {
        double cumulative = 0;
        size_t n = 0;
        while (n < candidates_.size()) {
            cumulative += probs_[n++];
            if (cumulative >= params_.top_p) break;
        }
        candidates_.resize(std::max<size_t>(n, 1));
        probs_.resize(candidates_.size());
    }
    if (params_.min_p > 0.0f) {
        const double floor = probs_[0] * params_.min_p;
        size_t n = 1;
        while (n < candidates_.size() && probs_[n] >= floor) ++n;
        candidates_.resize(n);
    }
    softmax(params_.temperature);
    double r = uniform();
    for (size_t i = 0; i < candidates_.size(); ++i) {
        if (r < probs_[i]) return candidates_[i].id;
        r -= probs_[i];
    }
    return candidates_.back().id;  // rounding left a sliver past the last probability
}

}  // namespace kiln
