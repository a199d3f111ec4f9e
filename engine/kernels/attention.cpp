// Scaled dot-product attention of one query head (see attention.h): the xsimd
// kernel and its scalar double-precision twin ref::attend.
//
// Both use the two-pass form (scores into scratch, then softmax weights, then
// the weighted sum of values) rather than an online softmax: the scratch row
// is provided anyway, and two passes avoid the repeated rescaling of the
// running sum that costs online softmax a little accuracy.
//
// Masked positions (kv_valid[j] == 0) are never read: a KV cache may hold
// uninitialized or stale rows there, and 0 * NaN would poison the output.
#include "engine/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/kernels/simd.h"

namespace kiln::kernels {

namespace {

using batch = xsimd::batch<float>;
constexpr int64_t W = static_cast<int64_t>(batch::size);
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Value rows accumulated in float before the partial sums are flushed into
// double. A float sum of kv_len terms has error growing like sqrt(kv_len) ulps
// (linearly when the values share a sign); flushing every kKeysPerBlock keys
// bounds that by the block, which keeps kv_len = 2048 within 1e-6 of the
// double-precision reference.
constexpr int64_t kKeysPerBlock = 64;
// Output dimensions handled per pass over the keys (the stack accumulators).
constexpr int64_t kDimsPerChunk = 256;

bool valid(const uint8_t* kv_valid, int64_t j) noexcept { return kv_valid == nullptr || kv_valid[j] != 0; }

float dot(const float* a, const float* b, int64_t n) noexcept {
    batch acc0(0.0f), acc1(0.0f);
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        acc0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), acc0);
        acc1 = xsimd::fma(batch::load_unaligned(a + i + W), batch::load_unaligned(b + i + W), acc1);
    }
    if (i + W <= n) {
        acc0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), acc0);
        i += W;
    }
    float s = xsimd::hadd(acc0 + acc1);
    for (; i < n; ++i) s = std::fma(a[i], b[i], s);
    return s;
}

// acc[d] += p * v[d] for d in [0, n).
void axpy(float p, const float* v, float* acc, int64_t n) noexcept {
    const batch pv(p);
    int64_t d = 0;
    for (; d + W <= n; d += W)
        xsimd::fma(pv, batch::load_unaligned(v + d), batch::load_aligned(acc + d)).store_aligned(acc + d);
    for (; d < n; ++d) acc[d] = std::fma(p, v[d], acc[d]);
}

}  // namespace

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch) noexcept {
    // Pass 1: scores of the valid positions; masked ones get -inf so that the
    // exp pass below turns them into exact zeros without a branch.
    float max = kNegInf;
    int64_t n_valid = 0;
    for (int64_t j = 0; j < kv_len; ++j) {
        if (!valid(kv_valid, j)) {
            scratch[j] = kNegInf;
            continue;
        }
        const float s = scale * dot(q, k + static_cast<size_t>(j) * k_stride, head_dim);
        scratch[j] = s;
        max = std::max(max, s);
        ++n_valid;
    }
    if (n_valid == 0) {
        std::fill(out, out + head_dim, 0.0f);
        return;
    }

    // Pass 2: unnormalized weights exp(s - max) in [0, 1] (exp(-inf) = 0 for
    // the masked) and their sum: each batch's W terms are added in float, the
    // batch totals in double.
    const batch mv(max);
    double sum = 0.0;
    int64_t j = 0;
    for (; j + W <= kv_len; j += W) {
        const batch e = xsimd::exp(batch::load_unaligned(scratch + j) - mv);
        e.store_unaligned(scratch + j);
        sum += static_cast<double>(xsimd::hadd(e));
    }
    for (; j < kv_len; ++j) {
        scratch[j] = xsimd::exp(batch(scratch[j] - max)).get(0);  // same exp as the body
        sum += static_cast<double>(scratch[j]);
    }
    const double inv_sum = 1.0 / sum;

    // Pass 3: out = Σ_j w_j v_j / sum, in blocks of keys (see kKeysPerBlock).
    alignas(64) float part[kDimsPerChunk];
    double total[kDimsPerChunk];
    for (int64_t d0 = 0; d0 < head_dim; d0 += kDimsPerChunk) {
        const int64_t nd = std::min(kDimsPerChunk, head_dim - d0);
        std::fill(total, total + nd, 0.0);
        for (int64_t j0 = 0; j0 < kv_len; j0 += kKeysPerBlock) {
            const int64_t j1 = std::min(kv_len, j0 + kKeysPerBlock);
            std::fill(part, part + nd, 0.0f);
            for (int64_t jj = j0; jj < j1; ++jj) {
                if (!valid(kv_valid, jj)) continue;
                axpy(scratch[jj], v + static_cast<size_t>(jj) * v_stride + d0, part, nd);
            }
            for (int64_t d = 0; d < nd; ++d) total[d] += static_cast<double>(part[d]);
        }
        for (int64_t d = 0; d < nd; ++d) out[d0 + d] = static_cast<float>(total[d] * inv_sum);
    }
}

namespace ref {

namespace {

double score(const float* q, const float* kj, int64_t head_dim, float scale) noexcept {
    double s = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * kj[d];
    return static_cast<double>(scale) * s;
}

}  // namespace

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch) noexcept {
    // Everything in double. Scores are recomputed rather than stored, because
    // scratch is float; only the weights exp(s - max) are stored there, which
    // perturbs the output by at most 2^-24 relative to Σ_j p_j |v_j[d]|.
    double max = -std::numeric_limits<double>::infinity();
    bool any = false;
    for (int64_t j = 0; j < kv_len; ++j) {
        if (!valid(kv_valid, j)) continue;
        max = std::max(max, score(q, k + static_cast<size_t>(j) * k_stride, head_dim, scale));
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
        const double e = std::exp(score(q, k + static_cast<size_t>(j) * k_stride, head_dim, scale) - max);
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
