// Scaled dot-product attention (see attention.h): the xsimd kernel, which
// takes a block of up to four queries reading the same key/value head so that
// each key and value row is loaded once for all of them, and the scalar
// double-precision twin ref::attend (one query).
//
// Both use the two-pass form (scores into scratch, then softmax weights, then
// the weighted sum of values) rather than an online softmax: the scratch row
// is provided anyway, and two passes avoid the repeated rescaling of the
// running sum that costs online softmax a little accuracy.
//
// Keys and values are read from the cache as stored, F32, F16, BF16, Q8_0 or
// Q4_0 (cache_rows.h), each element converted exactly as it is loaded: the
// templates below take the storage type of each, so a quantized cache costs
// no dequantized copy and gives the bits of an F32 cache of the same values.
//
// Masked positions (kv_valid[j] == 0) never reach a result: a KV cache may
// hold uninitialized or stale rows there, and 0 * NaN would poison the output.
// Their value rows are never read; a key row may be loaded with its tile, but
// its lanes are dropped.
#include "engine/kernels/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/kernels/cache_rows.h"

namespace kiln::kernels {

namespace {

using cache_rows::batch;
using cache_rows::element;
using cache_rows::load;
using cache_rows::W;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Value rows accumulated in float before the partial sums are flushed into
// double. A float sum of kv_len terms has error growing like sqrt(kv_len) ulps
// (linearly when the values share a sign); flushing every kKeysPerBlock keys
// bounds that by the block, which keeps kv_len = 2048 within 1e-6 of the
// double-precision reference.
constexpr int64_t kKeysPerBlock = 64;

// A head's rows lie kv_dim elements apart (3 KiB for a 768-wide F32 cache),
// too far apart for the hardware prefetcher to follow a decode step's walk
// over them: rows this far ahead are asked for while the current ones are used.
constexpr int64_t kPrefetchRows = 32;

void prefetch(const std::byte* p, size_t bytes) noexcept {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

bool valid(const uint8_t* kv_valid, int64_t j) noexcept { return kv_valid == nullptr || kv_valid[j] != 0; }

bool uses(const AttentionQuery& q, int64_t j) noexcept {
    return j >= q.kv_start && j < q.kv_len && valid(q.kv_valid, j);
}

// Keys [0, n) are used by every query of the block: the smallest kv_len, or 0
// when some query has a mask or a window (its keys are then checked one by one).
int64_t keys_all_use(const AttentionQuery* queries, int nq) noexcept {
    int64_t n = std::numeric_limits<int64_t>::max();
    for (int i = 0; i < nq; ++i)
        n = queries[i].kv_valid == nullptr && queries[i].kv_start == 0 ? std::min(n, queries[i].kv_len) : 0;
    return n;
}

// Gemma 2's score cap, cap · tanh(s / cap), as llama.cpp orders it (a multiply
// by 1/cap, tanh, a multiply by cap). One batch function for every score, so a
// score's bits do not depend on the epilogue it took.
batch capped(batch s, float softcap) noexcept {
    return xsimd::tanh(s * batch(1.0f / softcap)) * batch(softcap);
}

// Scores are computed in tiles of Q queries x W / Q keys, one accumulator per
// pair, reduced together by one haddp: W lanes. Q is 1, 2 or 4 after the
// block's size, so a lone query (a decode step without grouped heads) fills
// the lanes with keys instead of repeating itself.
constexpr int kQueries = kMaxBlockQueries;
static_assert(W % kQueries == 0, "a score tile fills one batch");
// Value dimensions per pass: up to four batches per query stay in registers.
constexpr int64_t kMaxValueBatches = 4;
constexpr int64_t kDimsPerPass = kMaxValueBatches * W;

// Where haddp puts the sum of row r. It should be lane r, but xsimd 8.1's
// AVX-512 haddp returns the rows in the order 0 1 4 5 2 3 6 7 8 9 12 13 ...;
// the order is probed once rather than assumed, so a fixed xsimd works too.
// (Every row is summed by the same tree, so a score's bits do not depend on
// its lane either way.)
const std::array<int, W>& haddp_lane_of_row() noexcept {
    static const std::array<int, W> lanes = [] {
        batch rows[W];
        for (int64_t r = 0; r < W; ++r) {
            alignas(64) float lane0[W] = {};
            lane0[0] = static_cast<float>(r);
            rows[r] = batch::load_aligned(lane0);
        }
        alignas(64) float sums[W];
        xsimd::haddp(rows).store_aligned(sums);
        std::array<int, W> out{};
        for (int64_t lane = 0; lane < W; ++lane) out[static_cast<size_t>(sums[lane])] = static_cast<int>(lane);
        return out;
    }();
    return lanes;
}

// haddp's sums moved to lane r = row r (a permutation: the bits are kept).
batch in_row_order(batch sums) noexcept {
#if defined(__AVX512F__)  // one lane permute instead of W scalar moves
    static_assert(W == 16);
    static const __m512i index = [] {
        alignas(64) int32_t lanes[16];
        for (int r = 0; r < 16; ++r) lanes[r] = haddp_lane_of_row()[static_cast<size_t>(r)];
        return _mm512_load_si512(lanes);
    }();
    return batch(_mm512_permutexvar_ps(index, sums));
#else
    alignas(64) float in[W], out[W];
    sums.store_aligned(in);
    for (int64_t r = 0; r < W; ++r) out[r] = in[haddp_lane_of_row()[static_cast<size_t>(r)]];
    return batch::load_aligned(out);
#endif
}

// Pass 1: score[i][j] = scale * q_i . k_j for the keys query i uses, -inf for
// the others. Every score goes through the same operations (the same lane of
// the same reduction, the same scalar tail) whatever the tile it is in, so a
// query's result does not depend on its block. A key row that no query uses
// may still be loaded (it lies inside the cache) but its lanes are dropped.
template <int Q, class K>
void scores(const AttentionQuery* queries, int nq, const float* const* q, const K* k, size_t k_stride,
            int64_t max_len, int64_t head_dim, float scale, float softcap, float* const* score, float* max_out,
            int64_t* n_valid_out) noexcept {
    constexpr int64_t kTileKeys = W / Q;
    const int64_t vector_dims = head_dim - head_dim % W;
    const std::array<int, W>& lane_of = haddp_lane_of_row();
    float max[kQueries];  // locals, kept in registers (the outputs may alias anything)
    int64_t n_valid[kQueries];
    std::copy(max_out, max_out + kQueries, max);
    std::copy(n_valid_out, n_valid_out + kQueries, n_valid);
    // Tiles whose keys every query of the block uses (no mask, inside every
    // kv_len) take a branch-free epilogue; it does the same float operations
    // on each score as the general one below, so the bits do not depend on
    // which epilogue a tile took. In a causal prompt that is all tiles but the
    // last few of each block.
    const int64_t all_use = head_dim == vector_dims ? keys_all_use(queries, nq) : 0;
    const batch scale_v(scale);
    batch max_v(kNegInf);  // lane i * kTileKeys + t: query i's max over the branch-free tiles
    for (int64_t j0 = 0; j0 < max_len; j0 += kTileKeys) {
        const K* key[kTileKeys];
        for (int64_t t = 0; t < kTileKeys; ++t) {
            key[t] = k + static_cast<size_t>(std::min(j0 + t, max_len - 1)) * k_stride;
            prefetch(cache_rows::address(k + static_cast<size_t>(std::min(j0 + t + kPrefetchRows, max_len - 1)) * k_stride, 0),
                     cache_rows::span_bytes<K>(head_dim));
        }
        batch acc[W];
        for (auto& a : acc) a = batch(0.0f);
        for (int64_t d = 0; d < vector_dims; d += W) {
            batch qv[Q];
            for (int i = 0; i < Q; ++i) qv[i] = batch::load_unaligned(q[i] + d);
            for (int64_t t = 0; t < kTileKeys; ++t) {
                const batch kv = load(key[t], d);
                for (int i = 0; i < Q; ++i) acc[i * kTileKeys + t] = xsimd::fma(qv[i], kv, acc[i * kTileKeys + t]);
            }
        }
        const batch sums = xsimd::haddp(acc);
        if (j0 + kTileKeys <= all_use) {
            alignas(64) float ordered[W];  // lane i * kTileKeys + t: query i, key j0 + t
            batch s = in_row_order(sums) * scale_v;
            if (softcap > 0.0f) s = capped(s, softcap);
            max_v = xsimd::max(max_v, s);
            s.store_aligned(ordered);
            for (int i = 0; i < nq; ++i) {
                std::copy(ordered + i * kTileKeys, ordered + (i + 1) * kTileKeys, score[i] + j0);
                n_valid[i] += kTileKeys;
            }
            continue;
        }
        alignas(64) float dots[W];
        sums.store_aligned(dots);
        for (int i = 0; i < nq; ++i) {
            for (int64_t t = 0; t < kTileKeys && j0 + t < max_len; ++t) {
                const int64_t j = j0 + t;
                if (!uses(queries[i], j)) {
                    if (j < queries[i].kv_len) score[i][j] = kNegInf;
                    continue;
                }
                float s = dots[lane_of[static_cast<size_t>(i * kTileKeys + t)]];
                for (int64_t d = vector_dims; d < head_dim; ++d) s = std::fma(q[i][d], element(key[t], d), s);
                s *= scale;
                if (softcap > 0.0f) s = capped(batch(s), softcap).get(0);
                score[i][j] = s;
                max[i] = std::max(max[i], s);
                ++n_valid[i];
            }
        }
    }
    alignas(64) float tile_max[W];
    max_v.store_aligned(tile_max);
    for (int i = 0; i < nq; ++i)
        for (int64_t t = 0; t < kTileKeys; ++t) max[i] = std::max(max[i], tile_max[i * kTileKeys + t]);
    std::copy(max, max + kQueries, max_out);
    std::copy(n_valid, n_valid + kQueries, n_valid_out);
}

// Pass 2: score[j] -> exp(score[j] - max) over [0, kv_len), masked ones
// becoming exact zeros; returns their sum (W terms in float, totals in double).
double exponentiate(float* score, int64_t kv_len, float max) noexcept {
    const batch mv(max);
    double sum = 0.0;
    int64_t j = 0;
    for (; j + W <= kv_len; j += W) {
        const batch e = xsimd::exp(batch::load_unaligned(score + j) - mv);
        e.store_unaligned(score + j);
        sum += static_cast<double>(xsimd::hadd(e));
    }
    for (; j < kv_len; ++j) {
        score[j] = xsimd::exp(batch(score[j] - max)).get(0);  // same exp as the body
        sum += static_cast<double>(score[j]);
    }
    return sum;
}

// Pass 3 for dimensions [d0, d0 + Batches * W + tail) and keys [j0, j1):
// total[i][d] += Σ_j w_i[j] v_j[d], summed in float (in key order) and then
// added to the double totals. A key row is read only if some query uses it,
// and only the queries that use it add it, so rows masked for the whole
// block (possibly NaN) are never touched and a query's sum does not depend
// on its block.
template <int64_t Batches, class V>
void accumulate_values(const AttentionQuery* queries, int nq, const float* const* weight, const V* v,
                       size_t v_stride, int64_t d0, int64_t tail, int64_t j0, int64_t j1,
                       double (*total)[kDimsPerPass]) noexcept {
    constexpr int64_t kBatches = Batches > 0 ? Batches : 1;  // arrays of at least one
    if constexpr (Batches == kMaxValueBatches) tail = 0;     // a full pass has no tail
    batch acc[kQueries][kBatches];
    float tail_acc[kQueries][W] = {};
    for (auto& row : acc)
        for (auto& a : row) a = batch(0.0f);
    // Keys every query of the block uses skip the per-key user mask (same
    // operations in the same order, so the same bits). The loop body is
    // written out twice on purpose: one shared body that tests each query's
    // user bit made this pass about 40% slower at pp512 (perf).
    const int64_t all_use = std::min(j1, keys_all_use(queries, nq));
    int64_t j = j0;
    for (; j < all_use; ++j) {
        const V* row = v + static_cast<size_t>(j) * v_stride;
        prefetch(cache_rows::address(v + static_cast<size_t>(std::min(j + kPrefetchRows, j1 - 1)) * v_stride, d0),
                 cache_rows::span_bytes<V>(Batches * W + tail));
        batch vv[kBatches];
        for (int64_t b = 0; b < Batches; ++b) vv[b] = load(row, d0 + b * W);
        for (int i = 0; i < nq; ++i) {
            const float w = weight[i][j];
            const batch wv(w);
            for (int64_t b = 0; b < Batches; ++b) acc[i][b] = xsimd::fma(wv, vv[b], acc[i][b]);
            for (int64_t d = 0; d < tail; ++d)
                tail_acc[i][d] = std::fma(w, element(row, d0 + Batches * W + d), tail_acc[i][d]);
        }
    }
    for (; j < j1; ++j) {
        unsigned users = 0;
        for (int i = 0; i < nq; ++i) users |= uses(queries[i], j) ? 1u << i : 0u;
        if (users == 0) continue;
        const V* row = v + static_cast<size_t>(j) * v_stride;
        prefetch(cache_rows::address(v + static_cast<size_t>(std::min(j + kPrefetchRows, j1 - 1)) * v_stride, d0),
                 cache_rows::span_bytes<V>(Batches * W + tail));
        batch vv[kBatches];
        for (int64_t b = 0; b < Batches; ++b) vv[b] = load(row, d0 + b * W);
        for (int i = 0; i < kQueries; ++i) {
            if ((users >> i & 1u) == 0) continue;
            const float w = weight[i][j];
            const batch wv(w);
            for (int64_t b = 0; b < Batches; ++b) acc[i][b] = xsimd::fma(wv, vv[b], acc[i][b]);
            for (int64_t d = 0; d < tail; ++d)
                tail_acc[i][d] = std::fma(w, element(row, d0 + Batches * W + d), tail_acc[i][d]);
        }
    }
    for (int i = 0; i < nq; ++i) {
        alignas(64) float part[kBatches * W];
        for (int64_t b = 0; b < Batches; ++b) acc[i][b].store_aligned(part + b * W);
        for (int64_t d = 0; d < Batches * W; ++d) total[i][d] += static_cast<double>(part[d]);
        for (int64_t d = 0; d < tail; ++d) total[i][Batches * W + d] += static_cast<double>(tail_acc[i][d]);
    }
}

}  // namespace

size_t attend_block_scratch(int64_t max_kv_len) noexcept {
    return static_cast<size_t>(kQueries) * static_cast<size_t>(std::max<int64_t>(max_kv_len, 0) + W);
}

namespace {

template <class K, class V>
void attend_block_typed(const AttentionQuery* queries, int nq, const K* k, size_t k_stride, const V* v,
                        size_t v_stride, int64_t head_dim, float scale, float softcap, float* scratch) noexcept {
    if (nq <= 0) return;
    nq = std::min(nq, kQueries);
    int64_t max_len = 0;
    for (int i = 0; i < nq; ++i) max_len = std::max(max_len, queries[i].kv_len);
    // Query rows past nq repeat the last query (computed, never stored).
    const float* q[kQueries];
    float* score[kQueries];
    for (int i = 0; i < kQueries; ++i) {
        q[i] = queries[std::min(i, nq - 1)].q;
        score[i] = scratch + static_cast<size_t>(std::min(i, nq - 1)) * static_cast<size_t>(max_len + W);
    }
    float max[kQueries];
    int64_t n_valid[kQueries] = {};
    std::fill(max, max + kQueries, kNegInf);
    if (max_len > 0) {
        if (nq == 1) scores<1>(queries, nq, q, k, k_stride, max_len, head_dim, scale, softcap, score, max, n_valid);
        else if (nq == 2) scores<2>(queries, nq, q, k, k_stride, max_len, head_dim, scale, softcap, score, max, n_valid);
        else scores<kQueries>(queries, nq, q, k, k_stride, max_len, head_dim, scale, softcap, score, max, n_valid);
    }

    // Fully masked queries get zeros and take no part in pass 3.
    AttentionQuery live[kQueries];
    const float* weight[kQueries];
    double inv_sum[kQueries];
    int n_live = 0;
    for (int i = 0; i < nq; ++i) {
        if (n_valid[i] == 0) {
            std::fill(queries[i].out, queries[i].out + head_dim, 0.0f);
            continue;
        }
        inv_sum[n_live] = 1.0 / exponentiate(score[i], queries[i].kv_len, max[i]);
        live[n_live] = queries[i];
        weight[n_live++] = score[i];
    }
    if (n_live == 0) return;
    for (int i = n_live; i < kQueries; ++i) weight[i] = weight[n_live - 1];

    double total[kQueries][kDimsPerPass];
    for (int64_t d0 = 0; d0 < head_dim; d0 += kDimsPerPass) {
        const int64_t nd = std::min(kDimsPerPass, head_dim - d0);
        const int64_t batches = nd / W, tail = nd % W;
        for (int i = 0; i < n_live; ++i) std::fill(total[i], total[i] + nd, 0.0);
        for (int64_t j0 = 0; j0 < max_len; j0 += kKeysPerBlock) {
            const int64_t j1 = std::min(max_len, j0 + kKeysPerBlock);
            switch (batches) {
                case 0: accumulate_values<0>(live, n_live, weight, v, v_stride, d0, tail, j0, j1, total); break;
                case 1: accumulate_values<1>(live, n_live, weight, v, v_stride, d0, tail, j0, j1, total); break;
                case 2: accumulate_values<2>(live, n_live, weight, v, v_stride, d0, tail, j0, j1, total); break;
                case 3: accumulate_values<3>(live, n_live, weight, v, v_stride, d0, tail, j0, j1, total); break;
                default: accumulate_values<4>(live, n_live, weight, v, v_stride, d0, tail, j0, j1, total); break;
            }
        }
        for (int i = 0; i < n_live; ++i)
            for (int64_t d = 0; d < nd; ++d) live[i].out[d0 + d] = static_cast<float>(total[i][d] * inv_sum[i]);
    }
}

}  // namespace

namespace {

// Calls f with the head's rows as a typed pointer to their storage units and
// the row stride in those units (a block holds 32 elements).
template <class F>
void with_rows(CacheHead head, F&& f) noexcept {
    using namespace cache_rows;
    const auto as = [&](auto* typed) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
        f(typed, head.stride / static_cast<size_t>(kPerUnit<T>));
    };
    switch (head.type) {
        case DType::F16: as(static_cast<const Half*>(head.data)); break;
        case DType::BF16: as(static_cast<const BHalf*>(head.data)); break;
        case DType::Q8_0: as(static_cast<const quant::BlockQ8_0*>(head.data)); break;
        case DType::Q4_0: as(static_cast<const quant::BlockQ4_0*>(head.data)); break;
        default: as(static_cast<const float*>(head.data)); break;
    }
}

}  // namespace

bool attention_cache_type(DType type) noexcept {
    return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
           type == DType::Q4_0;
}

void attend_block(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, float* scratch, float softcap) noexcept {
    with_rows(k, [&](const auto* k_rows, size_t k_stride) {
        with_rows(v, [&](const auto* v_rows, size_t v_stride) {
            attend_block_typed(queries, n_queries, k_rows, k_stride, v_rows, v_stride, head_dim, scale, softcap,
                               scratch);
        });
    });
}

void attend_block(const AttentionQuery* queries, int n_queries, const float* k, size_t k_stride, const float* v,
                  size_t v_stride, int64_t head_dim, float scale, float* scratch, float softcap) noexcept {
    attend_block_typed(queries, n_queries, k, k_stride, v, v_stride, head_dim, scale, softcap, scratch);
}

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch, float softcap,
            int64_t kv_start) noexcept {
    const AttentionQuery query{q, kv_len, kv_valid, out, kv_start};
    attend_block(&query, 1, k, k_stride, v, v_stride, head_dim, scale, scratch, softcap);
}

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
    const auto valid = [&](const uint8_t* mask, int64_t j) { return j >= kv_start && kernels::valid(mask, j); };
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
