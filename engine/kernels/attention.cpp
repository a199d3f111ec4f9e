// Scaled dot-product attention (see attention.h): the xsimd kernel, which
// takes a block of up to 16 queries reading the same key/value head so that
// each key and value row is loaded once for all of them. Its scalar
// double-precision twin ref::attend (one query) is in attention_ref.cpp.
//
// The fast kernel walks the keys a chunk at a time (kAttentionChunk, see
// attention.h): within a chunk it is the two-pass form (scores into scratch,
// the chunk's max, weights, the weighted sum of values), and the chunks'
// partial results are folded in order with the online softmax's rescaling,
// in double. So its scratch does not grow with the cache, and a long cache's
// chunks can be computed on several threads and folded afterwards with the
// same bits (attend_chunk, merge_attention_chunks). The reference is the
// plain two-pass form over all keys, in double.
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
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

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

// Keys [begin, end) are used by every query of the block: from the latest
// window start to the smallest kv_len; empty when some query has a mask (its
// keys are then checked one by one). A batched decode step's queries each
// start at their own slot's rows, so a window start is the common case.
struct KeyRange {
    int64_t begin = 0, end = 0;
    bool holds(int64_t j0, int64_t j1) const noexcept { return j0 >= begin && j1 <= end; }
};
KeyRange keys_all_use(const AttentionQuery* queries, int nq) noexcept {
    KeyRange r{0, std::numeric_limits<int64_t>::max()};
    for (int i = 0; i < nq; ++i) {
        if (queries[i].kv_valid != nullptr) return {0, 0};
        r.begin = std::max(r.begin, queries[i].kv_start);
        r.end = std::min(r.end, queries[i].kv_len);
    }
    if (r.end < r.begin) r.end = r.begin;
    return r;
}

// Gemma 2's score cap, cap · tanh(s / cap), as llama.cpp orders it (a multiply
// by 1/cap, tanh, a multiply by cap). One batch function for every score, so a
// score's bits do not depend on the epilogue it took.
batch capped(batch s, float softcap) noexcept {
    return xsimd::tanh(s * batch(1.0f / softcap)) * batch(softcap);
}

// Scores are computed in tiles of Q queries x W / Q keys, one accumulator per
// pair, reduced together by one haddp: W lanes. Q is 1, 2, 4 or 8 (at most
// W) after the register tile's size, so a lone query (a decode step without
// grouped heads) fills the lanes with keys instead of repeating itself, and a
// decode step's grouped-query heads (8 per key/value head in TinyLlama and
// Llama 3) share one tile: each key row is loaded and widened once for all of
// them rather than once per tile. A block of up to kMaxBlockQueries queries is
// walked as register tiles of kScoreQueries, chunk by chunk, so the chunk's
// keys and values come from the cache for the first tile and from L1/L2 for
// the others. Every score goes through the same reduction tree whatever Q is,
// so its bits do not depend on the tile.
constexpr int kScoreQueries = W >= 8 ? 8 : static_cast<int>(W);
static_assert(W % kScoreQueries == 0, "a score tile fills one batch");
static_assert(kMaxBlockQueries % kScoreQueries == 0, "a block is whole score tiles");
// Pass 3 (the weighted sum of value rows) takes a tile's queries kValueQueries
// at a time: their accumulators stay in registers with the value row's
// batches (AVX-512's 32 registers hold 4 x 4 + 4, AVX2's 16 hold 4 x 2 + 2;
// more spills them to the stack). Each query's sum is its own, so the bits do
// not depend on how queries are grouped here either.
constexpr int kValueQueries = 4;
static_assert(kScoreQueries % kValueQueries == 0 || kScoreQueries < kValueQueries);
static_assert(kAttentionChunk % kKeysPerBlock == 0 && kAttentionChunk % W == 0,
              "chunks are whole score tiles and value blocks");
constexpr int64_t kMaxValueBatches = W >= 16 ? 4 : 2;
// A tile of fewer queries takes more dimensions per pass, as many
// accumulators as kValueQueries would use (at most 8). Each accumulator is a
// chain of FMAs over the keys: a lone query (a decode step without grouped
// heads) with 2 batches waited on the latency of its two chains, where 8
// chains keep the FMA units busy. A (query, dimension) sum is the same chain
// whatever the pass width, so the bits do not change with it.
template <int Q>
constexpr int64_t kValueBatches = std::min<int64_t>(kMaxValueBatches * kValueQueries / Q, 8);
// A tile's scores for one chunk: kAttentionChunk floats per query, padded.
constexpr size_t kScoreStride = static_cast<size_t>(kAttentionChunk + W);

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
// Built once per call of scores() and applied inline to every tile: a call
// per tile (with its static-initialisation check) cost 6% of a decode step.
class RowOrder {
public:
    RowOrder() noexcept {
        static const Lanes lanes = [] {
            Lanes out{};
            for (int r = 0; r < W; ++r) out.lane[r] = haddp_lane_of_row()[static_cast<size_t>(r)];
            return out;
        }();
#if defined(__AVX512F__)
        index_ = _mm512_load_si512(lanes.lane);
#elif defined(__AVX2__)
        index_ = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes.lane));
#else
        lanes_ = &lanes;
#endif
    }
    batch operator()(batch sums) const noexcept {
#if defined(__AVX512F__)  // one lane permute instead of W scalar moves
        static_assert(W == 16);
        return batch(_mm512_permutexvar_ps(index_, sums));
#elif defined(__AVX2__)
        static_assert(W == 8);
        return batch(_mm256_permutevar8x32_ps(sums, index_));
#else
        alignas(64) float in[W], out[W];
        sums.store_aligned(in);
        for (int64_t r = 0; r < W; ++r) out[r] = in[lanes_->lane[r]];
        return batch::load_aligned(out);
#endif
    }

private:
    struct alignas(64) Lanes {
        int32_t lane[W];
    };
#if defined(__AVX512F__)
    __m512i index_;
#elif defined(__AVX2__)
    __m256i index_;
#else
    const Lanes* lanes_;
#endif
};

// Pass 1 over keys [j_begin, j_end): score[i][j - j_begin] = scale * q_i . k_j
// for the keys query i uses, -inf for the others below its kv_len. Every score
// goes through the same operations (the same lane of the same reduction, the
// same scalar tail) whatever the tile it is in, so a query's result does not
// depend on its block. A key row that no query uses may still be loaded (it
// lies inside the cache) but its lanes are dropped. Rows up to prefetch_end
// are asked for ahead of use (none when it is 0: another tile asked for them).
//
// The value rows of the same keys are asked for too: pass 3 reads them once
// the chunk's scores are done, and by then they are in L1/L2 instead of a
// DRAM latency away (the head's rows are kv_dim apart, a stride the hardware
// prefetcher loses at every page).
template <int Q, class K, class V>
void scores(const AttentionQuery* queries, int nq, const float* const* q, const K* k, size_t k_stride, const V* v,
            size_t v_stride, int64_t j_begin, int64_t j_end, int64_t prefetch_end, int64_t head_dim, float scale,
            float softcap, float* const* score, float* max_out, int64_t* n_valid_out) noexcept {
    constexpr int64_t kTileKeys = W / Q;
    const int64_t vector_dims = head_dim - head_dim % W;
    const std::array<int, W>& lane_of = haddp_lane_of_row();
    const RowOrder in_row_order;
    float max[kScoreQueries];  // locals, kept in registers (the outputs may alias anything)
    int64_t n_valid[kScoreQueries];
    std::copy(max_out, max_out + kScoreQueries, max);
    std::copy(n_valid_out, n_valid_out + kScoreQueries, n_valid);
    // Tiles whose keys every query of the block uses (no mask, inside every
    // kv_len) take a branch-free epilogue; it does the same float operations
    // on each score as the general one below, so the bits do not depend on
    // which epilogue a tile took. In a causal prompt that is all tiles but the
    // last few of each block.
    const KeyRange all_use = head_dim == vector_dims ? keys_all_use(queries, nq) : KeyRange{};
    const batch scale_v(scale);
    batch max_v(kNegInf);  // lane i * kTileKeys + t: query i's max over the branch-free tiles
    int64_t branch_free_tiles = 0;
    for (int64_t j0 = j_begin; j0 < j_end; j0 += kTileKeys) {
        const K* key[kTileKeys];
        for (int64_t t = 0; t < kTileKeys; ++t) {
            key[t] = k + static_cast<size_t>(std::min(j0 + t, j_end - 1)) * k_stride;
            if (prefetch_end == 0) continue;
            prefetch(cache_rows::address(k + static_cast<size_t>(std::min(j0 + t + kPrefetchRows, prefetch_end - 1)) * k_stride, 0),
                     cache_rows::span_bytes<K>(head_dim));
            prefetch(cache_rows::address(v + static_cast<size_t>(std::min(j0 + t, j_end - 1)) * v_stride, 0),
                     cache_rows::span_bytes<V>(head_dim));
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
        if (j0 + kTileKeys <= j_end && all_use.holds(j0, j0 + kTileKeys)) {
            alignas(64) float ordered[W];  // lane i * kTileKeys + t: query i, key j0 + t
            batch s = in_row_order(sums) * scale_v;
            if (softcap > 0.0f) s = capped(s, softcap);
            max_v = xsimd::max(max_v, s);
            s.store_aligned(ordered);
            // Query i's keys are lanes [i * kTileKeys, (i + 1) * kTileKeys): one
            // small copy each. Rows past nq repeat the last query, whose score
            // row they share, so all Q copies are made without a bound check.
            for (int i = 0; i < Q; ++i)
                std::memcpy(score[i] + (j0 - j_begin), ordered + i * kTileKeys, sizeof(float) * kTileKeys);
            branch_free_tiles += 1;
            continue;
        }
        alignas(64) float dots[W];
        sums.store_aligned(dots);
        for (int i = 0; i < nq; ++i) {
            for (int64_t t = 0; t < kTileKeys && j0 + t < j_end; ++t) {
                const int64_t j = j0 + t;
                if (!uses(queries[i], j)) {
                    if (j < queries[i].kv_len) score[i][j - j_begin] = kNegInf;
                    continue;
                }
                float s = dots[lane_of[static_cast<size_t>(i * kTileKeys + t)]];
                for (int64_t d = vector_dims; d < head_dim; ++d) s = std::fma(q[i][d], element(key[t], d), s);
                s *= scale;
                if (softcap > 0.0f) s = capped(batch(s), softcap).get(0);
                score[i][j - j_begin] = s;
                max[i] = std::max(max[i], s);
                ++n_valid[i];
            }
        }
    }
    for (int i = 0; i < nq; ++i) n_valid[i] += branch_free_tiles * kTileKeys;
    alignas(64) float tile_max[W];
    max_v.store_aligned(tile_max);
    for (int i = 0; i < nq; ++i)
        for (int64_t t = 0; t < kTileKeys; ++t) max[i] = std::max(max[i], tile_max[i * kTileKeys + t]);
    std::copy(max, max + kScoreQueries, max_out);
    std::copy(n_valid, n_valid + kScoreQueries, n_valid_out);
}

// Pass 2: score[j] -> exp(score[j] - max) over [0, n), masked ones becoming
// exact zeros; returns their sum (W terms in float, totals in double).
double exponentiate(float* score, int64_t n, float max) noexcept {
    const batch mv(max);
    double sum = 0.0;
    int64_t j = 0;
    for (; j + W <= n; j += W) {
        const batch e = xsimd::exp(batch::load_unaligned(score + j) - mv);
        e.store_unaligned(score + j);
        sum += static_cast<double>(xsimd::hadd(e));
    }
    for (; j < n; ++j) {
        score[j] = xsimd::exp(batch(score[j] - max)).get(0);  // same exp as the body
        sum += static_cast<double>(score[j]);
    }
    return sum;
}

// Pass 3 for dimensions [d0, d0 + Batches * W + tail) and keys [j0, j1):
// total[i][d - d0] += Σ_j w_i[j] v_j[d] (w_i[j] at weight[i][j - base]),
// summed in float (in key order) and then added to the double totals (set by
// the first block of keys, first == true). A key row is read
// only if some query uses it, and only the queries that use it add it, so
// rows masked for the whole tile (possibly NaN) are never touched and a
// query's sum does not depend on its tile. Q is the register tile's size (1,
// 2 or 4 >= nq; rows past nq repeat the last query's weights, never stored).
template <int Q, int64_t Batches, class V>
void accumulate_values(const AttentionQuery* queries, int nq, const float* const* weight, int64_t base, const V* v,
                       size_t v_stride, int64_t d0, int64_t tail, int64_t j0, int64_t j1, int64_t prefetch_end,
                       double* const* total, bool first) noexcept {
    constexpr int64_t kBatches = Batches > 0 ? Batches : 1;  // arrays of at least one
    if constexpr (Batches == kValueBatches<Q>) tail = 0;     // a full pass has no tail
    batch acc[Q][kBatches];
    float tail_acc[Q][W] = {};
    for (auto& row : acc)
        for (auto& a : row) a = batch(0.0f);
    const auto prefetch_row = [&](int64_t j) {
        prefetch(cache_rows::address(v + static_cast<size_t>(std::min(j + kPrefetchRows, prefetch_end - 1)) * v_stride, d0),
                 cache_rows::span_bytes<V>(Batches * W + tail));
    };
    // Keys every query of the tile uses skip the per-key user mask (same
    // operations in the same order, so the same bits). The loop body is
    // written out twice on purpose: one shared body that tests each query's
    // user bit made this pass about 40% slower at pp512 (perf). Keys before
    // and after the shared range take the masked body, in key order.
    const auto masked_keys = [&](int64_t from, int64_t to) {
        for (int64_t j = from; j < to; ++j) {
            unsigned users = 0;
            for (int i = 0; i < nq; ++i) users |= uses(queries[i], j) ? 1u << i : 0u;
            if (users == 0) continue;
            const V* row = v + static_cast<size_t>(j) * v_stride;
            prefetch_row(j);
            batch vv[kBatches];
            for (int64_t b = 0; b < Batches; ++b) vv[b] = load(row, d0 + b * W);
            for (int i = 0; i < Q; ++i) {
                if ((users >> i & 1u) == 0) continue;
                const float w = weight[i][j - base];
                const batch wv(w);
                for (int64_t b = 0; b < Batches; ++b) acc[i][b] = xsimd::fma(wv, vv[b], acc[i][b]);
                for (int64_t d = 0; d < tail; ++d)
                    tail_acc[i][d] = std::fma(w, element(row, d0 + Batches * W + d), tail_acc[i][d]);
            }
        }
    };
    const KeyRange shared = keys_all_use(queries, nq);
    const int64_t fast_begin = std::clamp(shared.begin, j0, j1), fast_end = std::clamp(shared.end, fast_begin, j1);
    masked_keys(j0, fast_begin);
    // The keys every query uses, their sums in locals of this loop alone,
    // which the compiler keeps in registers (acc, which the masked loops also
    // reach, stayed in memory for some tile shapes: a store and a reload on
    // every key's chain). The tail's scalar sums only where there is a tail
    // (every pass of a head_dim that is whole batches has none).
    const auto shared_keys = [&]<bool kTail>() {
        batch sum[Q][kBatches];
        for (int i = 0; i < Q; ++i)
            for (int64_t b = 0; b < kBatches; ++b) sum[i][b] = acc[i][b];
        for (int64_t j = fast_begin; j < fast_end; ++j) {
            const V* row = v + static_cast<size_t>(j) * v_stride;
            prefetch_row(j);
            batch vv[kBatches];
            for (int64_t b = 0; b < Batches; ++b) vv[b] = load(row, d0 + b * W);
            for (int i = 0; i < Q; ++i) {
                const float w = weight[i][j - base];
                const batch wv(w);
                for (int64_t b = 0; b < Batches; ++b) sum[i][b] = xsimd::fma(wv, vv[b], sum[i][b]);
                if constexpr (kTail)
                    for (int64_t d = 0; d < tail; ++d)
                        tail_acc[i][d] = std::fma(w, element(row, d0 + Batches * W + d), tail_acc[i][d]);
            }
        }
        for (int i = 0; i < Q; ++i)
            for (int64_t b = 0; b < kBatches; ++b) acc[i][b] = sum[i][b];
    };
    if (tail == 0) shared_keys.template operator()<false>();
    else shared_keys.template operator()<true>();
    masked_keys(fast_end, j1);
    for (int i = 0; i < nq; ++i) {
        alignas(64) float part[kBatches * W];
        for (int64_t b = 0; b < Batches; ++b) acc[i][b].store_aligned(part + b * W);
        // The first block of keys sets the totals, the later ones add to them.
        double* t = total[i];
        if (first) {
            for (int64_t d = 0; d < Batches * W; ++d) t[d] = static_cast<double>(part[d]);
            for (int64_t d = 0; d < tail; ++d) t[Batches * W + d] = static_cast<double>(tail_acc[i][d]);
        } else {
            for (int64_t d = 0; d < Batches * W; ++d) t[d] += static_cast<double>(part[d]);
            for (int64_t d = 0; d < tail; ++d) t[Batches * W + d] += static_cast<double>(tail_acc[i][d]);
        }
    }
}

// accumulate_values for a pass of `batches` (at most B) whole batches and `tail` floats.
template <int Q, int64_t B = kValueBatches<Q>, class V>
void accumulate_pass(int64_t batches, const AttentionQuery* queries, int nq, const float* const* weight, int64_t base,
                     const V* v, size_t v_stride, int64_t d0, int64_t tail, int64_t j0, int64_t j1,
                     int64_t prefetch_end, double* const* total, bool first) noexcept {
    if constexpr (B == 0) {
        accumulate_values<Q, 0>(queries, nq, weight, base, v, v_stride, d0, tail, j0, j1, prefetch_end, total, first);
    } else if (batches >= B) {
        accumulate_values<Q, B>(queries, nq, weight, base, v, v_stride, d0, tail, j0, j1, prefetch_end, total, first);
    } else {
        accumulate_pass<Q, B - 1>(batches, queries, nq, weight, base, v, v_stride, d0, tail, j0, j1, prefetch_end, total,
                                  first);
    }
}

// ---------------------------------------------------------------- partial results
// A query's partial result: [max, Σ w, Σ w v[0..head_dim)] in doubles, w =
// exp(s - max); max = -inf: no key used (the rest is not read).

constexpr double kNoKeys = -std::numeric_limits<double>::infinity();

size_t partial_doubles(int64_t head_dim) noexcept { return static_cast<size_t>(head_dim) + 2; }

// state <- state ⊕ chunk: both rescaled to the larger maximum. Out of line so
// that every caller (attend_block's running fold, merge_attention_chunks)
// runs the same instructions: the split and unsplit forms give the same bits.
[[gnu::noinline]] void fold(double* state, const double* chunk, int64_t head_dim) noexcept {
    if (chunk[0] == kNoKeys) return;
    if (state[0] == kNoKeys) {
        std::copy(chunk, chunk + partial_doubles(head_dim), state);
        return;
    }
    const double max = std::max(state[0], chunk[0]);
    const double a = std::exp(state[0] - max), b = std::exp(chunk[0] - max);
    state[0] = max;
    state[1] = state[1] * a + chunk[1] * b;
    for (int64_t d = 0; d < head_dim; ++d) state[2 + d] = state[2 + d] * a + chunk[2 + d] * b;
}

// Fully masked queries get zeros (softmax over an empty set is undefined).
void finish(const double* state, int64_t head_dim, float* out) noexcept {
    if (state[0] == kNoKeys) {
        std::fill(out, out + head_dim, 0.0f);
        return;
    }
    const double inv_sum = 1.0 / state[1];
    for (int64_t d = 0; d < head_dim; ++d) out[d] = static_cast<float>(state[2 + d] * inv_sum);
}

// Whether a query may use a key of [j0, j1) (masks aside). When it cannot,
// its partial for the chunk is empty.
bool reaches(const AttentionQuery& q, int64_t j0, int64_t j1) noexcept { return q.kv_len > j0 && q.kv_start < j1; }

// The per-thread doubles the block walk keeps (running states, one tile's
// chunk partials); grown on first use, never shrunk.
double* thread_doubles(size_t n) noexcept {
    thread_local std::vector<double> doubles;
    if (doubles.size() < n) doubles.resize(n);
    return doubles.data();
}

// The weighted sums of value rows (pass 3) for a tile's live queries, each
// with its scores turned into weights, kValueQueries at a time.
template <class V>
void tile_values(const AttentionQuery* live, int n_live, const float* const* weight, double* const* live_partial,
                 const V* v, size_t v_stride, int64_t head_dim, int64_t j0, int64_t end) noexcept {
    for (int s0 = 0; s0 < n_live; s0 += kValueQueries) {
        const int n = std::min(kValueQueries, n_live - s0);
        const AttentionQuery* sub = live + s0;
        const float* w[kValueQueries];
        for (int i = 0; i < kValueQueries; ++i) w[i] = weight[s0 + std::min(i, n - 1)];
        const auto passes = [&]<int Q>() {
            constexpr int64_t kDimsPerPass = kValueBatches<Q> * W;
            for (int64_t d0 = 0; d0 < head_dim; d0 += kDimsPerPass) {
                const int64_t nd = std::min(kDimsPerPass, head_dim - d0);
                const int64_t batches = nd / W, tail = nd % W;
                // The sums go straight into the partials: a buffer zeroed and
                // copied with a run-time length compiled to rep stos/movs, whose
                // start-up cost was 7% of a decode step's attention (perf).
                double* total[kValueQueries];
                for (int i = 0; i < kValueQueries; ++i) total[i] = live_partial[s0 + std::min(i, n - 1)] + 2 + d0;
                for (int64_t ja = j0; ja < end; ja += kKeysPerBlock) {
                    const int64_t jb = std::min(end, ja + kKeysPerBlock);
                    accumulate_pass<Q>(batches, sub, n, w, j0, v, v_stride, d0, tail, ja, jb, end, total, ja == j0);
                }
            }
        };
        if (n == 1) passes.template operator()<1>();
        else if (n == 2) passes.template operator()<2>();
        else passes.template operator()<kValueQueries>();
    }
}

// One register tile (up to kScoreQueries queries) over keys [j0, j1): each
// query's partial result to partial[i]. Out of line for the same reason as
// fold. The first tile of a chunk asks for the chunk's rows ahead of use; the
// others find them in L1/L2.
template <class K, class V>
[[gnu::noinline]] void tile_chunk(const AttentionQuery* queries, int nq, const K* k, size_t k_stride, const V* v,
                                  size_t v_stride, int64_t head_dim, float scale, float softcap, int64_t j0,
                                  int64_t j1, bool first_tile, float* scratch, double* const* partial) noexcept {
    int64_t max_len = 0;
    for (int i = 0; i < nq; ++i) max_len = std::max(max_len, queries[i].kv_len);
    const int64_t end = std::min(j1, max_len);
    // Query rows past nq repeat the last query (computed, never stored).
    const float* q[kScoreQueries];
    float* score[kScoreQueries];
    for (int i = 0; i < kScoreQueries; ++i) {
        q[i] = queries[std::min(i, nq - 1)].q;
        score[i] = scratch + static_cast<size_t>(std::min(i, nq - 1)) * kScoreStride;
    }
    float max[kScoreQueries];
    int64_t n_valid[kScoreQueries] = {};
    std::fill(max, max + kScoreQueries, kNegInf);
    if (end > j0) {
        const int64_t prefetch_end = first_tile ? max_len : 0;  // 0: ask for no rows
        const auto run = [&](auto tile) {
            scores<decltype(tile)::value>(queries, nq, q, k, k_stride, v, v_stride, j0, end, prefetch_end, head_dim,
                                          scale, softcap, score, max, n_valid);
        };
        if (nq == 1) run(std::integral_constant<int, 1>{});
        else if (nq == 2) run(std::integral_constant<int, 2>{});
        else if (nq <= 4 || kScoreQueries == 4) run(std::integral_constant<int, 4>{});
        else run(std::integral_constant<int, kScoreQueries>{});
    }

    // Queries with no key in the chunk take no part in pass 3.
    AttentionQuery live[kScoreQueries];
    const float* weight[kScoreQueries];
    double* live_partial[kScoreQueries];
    int n_live = 0;
    for (int i = 0; i < nq; ++i) {
        if (n_valid[i] == 0) {
            partial[i][0] = kNoKeys;
            partial[i][1] = 0.0;
            continue;
        }
        partial[i][0] = max[i];
        partial[i][1] = exponentiate(score[i], std::min(end, queries[i].kv_len) - j0, max[i]);
        live[n_live] = queries[i];
        live_partial[n_live] = partial[i];
        weight[n_live++] = score[i];
    }
    if (n_live > 0) tile_values(live, n_live, weight, live_partial, v, v_stride, head_dim, j0, end);
}

// Chunk `chunk` for a block: the queries that reach it are packed into
// register tiles (a tile computes every dot product of its queries and keys,
// so a query that needs none of the chunk's keys, such as another sequence's
// in a batched decode step, would only waste them); query i's partial to
// partials + i * partial_doubles(head_dim), empty for the others. A query's
// result does not depend on its tile, so the packing keeps every bit.
template <class K, class V>
void block_chunk(const AttentionQuery* queries, int nq, const K* k, size_t k_stride, const V* v, size_t v_stride,
                 int64_t head_dim, float scale, float softcap, int64_t chunk, float* scratch,
                 double* partials) noexcept {
    const int64_t j0 = chunk * kAttentionChunk, j1 = j0 + kAttentionChunk;
    const size_t pd = partial_doubles(head_dim);
    AttentionQuery reaching[kMaxBlockQueries];
    double* partial[kMaxBlockQueries];
    int n = 0;
    for (int i = 0; i < nq; ++i) {
        double* p = partials + static_cast<size_t>(i) * pd;
        if (!reaches(queries[i], j0, j1)) {
            p[0] = kNoKeys, p[1] = 0.0;
            continue;
        }
        reaching[n] = queries[i];
        partial[n++] = p;
    }
    for (int t0 = 0; t0 < n; t0 += kScoreQueries)
        tile_chunk(reaching + t0, std::min(kScoreQueries, n - t0), k, k_stride, v, v_stride, head_dim, scale, softcap,
                   j0, j1, t0 == 0, scratch, partial + t0);
}

int64_t chunks_of(const AttentionQuery* queries, int nq) noexcept {
    int64_t max_len = 0;
    for (int i = 0; i < nq; ++i) max_len = std::max(max_len, queries[i].kv_len);
    return (max_len + kAttentionChunk - 1) / kAttentionChunk;
}

template <class K, class V>
void attend_block_typed(const AttentionQuery* queries, int nq, const K* k, size_t k_stride, const V* v,
                        size_t v_stride, int64_t head_dim, float scale, float softcap, float* scratch) noexcept {
    if (nq <= 0) return;
    nq = std::min(nq, kMaxBlockQueries);
    const size_t pd = partial_doubles(head_dim);
    double* state = thread_doubles(2 * static_cast<size_t>(nq) * pd);  // running results, then chunk partials
    double* chunk_partials = state + static_cast<size_t>(nq) * pd;
    int64_t first_chunk = std::numeric_limits<int64_t>::max();
    for (int i = 0; i < nq; ++i) {
        state[static_cast<size_t>(i) * pd] = kNoKeys;
        state[static_cast<size_t>(i) * pd + 1] = 0.0;
        first_chunk = std::min(first_chunk, std::max<int64_t>(queries[i].kv_start, 0) / kAttentionChunk);
    }
    const int64_t n_chunks = chunks_of(queries, nq);
    for (int64_t c = first_chunk; c < n_chunks; ++c) {
        block_chunk(queries, nq, k, k_stride, v, v_stride, head_dim, scale, softcap, c, scratch, chunk_partials);
        for (int i = 0; i < nq; ++i)
            fold(state + static_cast<size_t>(i) * pd, chunk_partials + static_cast<size_t>(i) * pd, head_dim);
    }
    for (int i = 0; i < nq; ++i) finish(state + static_cast<size_t>(i) * pd, head_dim, queries[i].out);
}

}  // namespace

size_t attend_block_scratch(int64_t max_kv_len) noexcept {
    return std::max(static_cast<size_t>(std::max<int64_t>(max_kv_len, 0)), static_cast<size_t>(kScoreQueries) * kScoreStride);
}

size_t attention_partial_doubles(int64_t head_dim) noexcept { return partial_doubles(head_dim); }

int64_t attention_chunks(const AttentionQuery* queries, int n_queries) noexcept {
    return chunks_of(queries, std::min(n_queries, kMaxBlockQueries));
}

void merge_attention_chunks(const double* partials, int64_t n_chunks, size_t chunk_stride, int64_t head_dim,
                            float* out) noexcept {
    const size_t pd = partial_doubles(head_dim);
    double* state = thread_doubles(pd);
    state[0] = kNoKeys;
    state[1] = 0.0;
    for (int64_t c = 0; c < n_chunks; ++c) fold(state, partials + static_cast<size_t>(c) * chunk_stride, head_dim);
    finish(state, head_dim, out);
}

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

void attend_chunk(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, int64_t chunk, double* partials, float* scratch, float softcap) noexcept {
    if (n_queries <= 0) return;
    with_rows(k, [&](const auto* k_rows, size_t k_stride) {
        with_rows(v, [&](const auto* v_rows, size_t v_stride) {
            block_chunk(queries, std::min(n_queries, kMaxBlockQueries), k_rows, k_stride, v_rows, v_stride, head_dim,
                        scale, softcap, chunk, scratch, partials);
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

}  // namespace kiln::kernels
