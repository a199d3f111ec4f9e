// The scalar twin of the attention kernel (attention.h): one query, the plain
// two-pass softmax over all keys, in double. Built once, for the baseline of
// the architecture, like every reference kernel.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/kernels/attention.h"

namespace kiln::kernels {

namespace ref {

namespace {

double score(const float* q, const float* kj, int64_t head_dim, float scale, float softcap) noexcept {
    double s = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * kj[d];
    s *= static_cast<double>(scale);
    return softcap > 0.0f ? softcap * std::tanh(s / softcap) : s;
}

}  // namespace

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch, float softcap,
            int64_t kv_start) noexcept {
    const auto valid = [&](const uint8_t* mask, int64_t j) { return j >= kv_start && (mask == nullptr || mask[j] != 0); };
    // Everything in double. Scores are recomputed rather than stored, because
    // scratch is float; only the weights exp(s - max) are stored there, which
    // perturbs the output by at most 2^-24 relative to Σ_j p_j |v_j[d]|.
    double max = -std::numeric_limits<double>::infinity();
    bool any = false;
    for (int64_t j = 0; j < kv_len; ++j) {
        if (!valid(kv_valid, j)) continue;
        max = std::max(max, score(q, k + static_cast<size_t>(j) * k_stride, head_dim, scale, softcap));
        any = true;
    }
    if (!any) {
        // Fully masked: zeros (softmax over an empty set is undefined; zeros
        // are what a padded query row should contribute).
        for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < kv_len; ++j) {
        if (!valid(kv_valid, j)) {
            scratch[j] = 0.0f;
            continue;
        }
        const double e = std::exp(score(q, k + static_cast<size_t>(j) * k_stride, head_dim, scale, softcap) - max);
        scratch[j] = static_cast<float>(e);
        sum += e;
    }
    for (int64_t d = 0; d < head_dim; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j < kv_len; ++j) {
            if (!valid(kv_valid, j)) continue;
            acc += static_cast<double>(scratch[j]) * v[static_cast<size_t>(j) * v_stride + d];
        }
        out[d] = static_cast<float>(acc / sum);
    }
}

}  // namespace ref

}  // namespace kiln::kernels
