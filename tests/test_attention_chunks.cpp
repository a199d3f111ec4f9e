// The chunked attention (kernels/attention.h): keys a chunk at a time, with
// the chunks' partial results folded by the online softmax's rescaling.
//  * Split form against the block form: attend_chunk for every chunk, then
//    merge_attention_chunks, gives each query the bits attend_block gives it
//    (on caches of several chunks, with windows and masks that cross chunk
//    boundaries, fully masked queries, chunks no query reaches, F32/F16/Q8_0).
//  * Long caches against the double-precision reference, with the tolerance of
//    test_kernels_attention.cpp: |d| <= 1e-6 Σ_j p_j |v_j[d]|. Folding adds per
//    chunk two double exps and a multiply-add per output (relative error
//    ~1e-16 each, a few hundred chunks at most), far below the float errors
//    of the dot products and value sums that bound already covers.
//  * The graph op: a decode step over a long cache splits each block's chunks
//    over the threads; its outputs are the same bits for 1 to 5 threads, and
//    within the tolerance of the reference mode's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/core/half.h"
#include "engine/graph/executor.h"
#include "engine/kernels/attention.h"
#include "engine/ops/ops.h"
#include "engine/runtime/thread_pool.h"

using namespace kiln;
namespace k = kiln::kernels;

namespace {

std::vector<float> normal_floats(size_t n, uint32_t seed, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(mean, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

// Key and value rows of one head, `stride` floats apart, also as F16 bits.
struct Head {
    int64_t head_dim, rows;
    size_t stride;
    std::vector<float> k, v;
    std::vector<uint16_t> k16, v16;

    Head(int64_t hd, int64_t n, uint32_t seed) : head_dim(hd), rows(n), stride(static_cast<size_t>(hd + 7)) {
        k = normal_floats(stride * static_cast<size_t>(n), seed);
        v = normal_floats(stride * static_cast<size_t>(n), seed + 1, 0.5f);
        for (float x : k) k16.push_back(fp32_to_fp16(x));
        for (float x : v) v16.push_back(fp32_to_fp16(x));
    }
    k::CacheHead keys(DType t) const {
        return t == DType::F16 ? k::CacheHead{k16.data(), stride, t} : k::CacheHead{k.data(), stride, DType::F32};
    }
    k::CacheHead values(DType t) const {
        return t == DType::F16 ? k::CacheHead{v16.data(), stride, t} : k::CacheHead{v.data(), stride, DType::F32};
    }
};

struct Block {
    std::vector<std::vector<float>> q, out;
    std::vector<std::vector<uint8_t>> masks;
    std::vector<k::AttentionQuery> queries;
};

// n queries with lengths, windows and masks chosen by `kind`.
Block make_block(int n, int64_t head_dim, int64_t rows, int kind, std::mt19937& rng) {
    Block b;
    std::uniform_int_distribution<int64_t> len_of(1, rows);
    for (int i = 0; i < n; ++i) {
        b.q.push_back(normal_floats(static_cast<size_t>(head_dim), rng()));
        b.out.emplace_back(static_cast<size_t>(head_dim), -1.0f);
        b.masks.emplace_back(static_cast<size_t>(rows), 1);
        int64_t kv_len = std::max<int64_t>(rows - (n - 1 - i), 1), kv_start = 0;  // kind 0: a causal prompt's last tokens
        if (kind == 1) kv_len = len_of(rng);                                      // random lengths
        if (kind == 2) kv_start = std::max<int64_t>(0, kv_len - 300 - 37 * i);  // windows crossing chunks
        if (kind == 3)  // random masks, one query fully masked
            for (auto& m : b.masks.back()) m = (i == 1 || rng() % 3 == 0) ? 0 : 1;
        if (kind == 4) kv_start = kv_len;  // empty windows: zeros
        b.queries.push_back({b.q.back().data(), kv_len, kind == 3 ? b.masks.back().data() : nullptr,
                             b.out.back().data(), kv_start});
    }
    return b;
}

}  // namespace

TEST_CASE("chunked attention: the split form folds to attend_block's bits", "[kernels][attention]") {
    std::mt19937 rng(11);
    for (int64_t head_dim : {33, 64, 80}) {
        for (int64_t rows : {1, 255, 256, 257, 700, 1300}) {
            const Head head(head_dim, rows, static_cast<uint32_t>(rows + head_dim));
            for (DType type : {DType::F32, DType::F16}) {
                for (int nq : {1, 3, 8, 16}) {
                    for (int kind = 0; kind < 5; ++kind) {
                        INFO("head_dim=" << head_dim << " rows=" << rows << " type=" << dtype_name(type)
                                         << " queries=" << nq << " kind=" << kind);
                        Block whole = make_block(nq, head_dim, rows, kind, rng);
                        std::vector<float> scratch(k::attend_block_scratch(rows));
                        k::attend_block(whole.queries.data(), nq, head.keys(type), head.values(type), head_dim,
                                        0.125f, scratch.data());

                        // The same queries, split: every chunk alone, then folded.
                        Block split = whole;
                        for (int i = 0; i < nq; ++i) {
                            split.queries[static_cast<size_t>(i)].out = split.out[static_cast<size_t>(i)].data();
                            std::fill(split.out[static_cast<size_t>(i)].begin(), split.out[static_cast<size_t>(i)].end(), -2.0f);
                            if (kind == 3) split.queries[static_cast<size_t>(i)].kv_valid = split.masks[static_cast<size_t>(i)].data();
                            split.queries[static_cast<size_t>(i)].q = split.q[static_cast<size_t>(i)].data();
                        }
                        const int64_t chunks = k::attention_chunks(split.queries.data(), nq);
                        int64_t max_len = 0;
                        for (const auto& q : split.queries) max_len = std::max(max_len, q.kv_len);
                        REQUIRE(chunks == (max_len + k::kAttentionChunk - 1) / k::kAttentionChunk);
                        const size_t pd = k::attention_partial_doubles(head_dim);
                        const size_t chunk_stride = static_cast<size_t>(nq) * pd;
                        std::vector<double> partials(static_cast<size_t>(chunks) * chunk_stride,
                                                     std::numeric_limits<double>::quiet_NaN());
                        for (int64_t c = chunks - 1; c >= 0; --c)  // any order: each chunk is its own
                            k::attend_chunk(split.queries.data(), nq, head.keys(type), head.values(type), head_dim,
                                            0.125f, c, partials.data() + static_cast<size_t>(c) * chunk_stride,
                                            scratch.data());
                        for (int i = 0; i < nq; ++i)
                            k::merge_attention_chunks(partials.data() + static_cast<size_t>(i) * pd, chunks, chunk_stride,
                                                      head_dim, split.out[static_cast<size_t>(i)].data());
                        for (int i = 0; i < nq; ++i) {
                            const auto& a = whole.out[static_cast<size_t>(i)];
                            const auto& b = split.out[static_cast<size_t>(i)];
                            REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
                            if (kind == 4 || (kind == 3 && i == 1))  // nothing to attend to: zeros
                                for (float x : a) REQUIRE(x == 0.0f);
                            else
                                for (float x : a) REQUIRE(std::isfinite(x));
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("chunked attention: long caches stay within 1e-6 of the double reference", "[kernels][attention]") {
    std::mt19937 rng(5);
    for (int64_t rows : {4097, 9000}) {
        const int64_t head_dim = 64;
        const Head head(head_dim, rows, 99);
        std::vector<float> abs_v(head.v.size());
        for (size_t i = 0; i < abs_v.size(); ++i) abs_v[i] = std::fabs(head.v[i]);
        for (int kind : {0, 2, 3}) {
            INFO("rows=" << rows << " kind=" << kind);
            Block b = make_block(8, head_dim, rows, kind, rng);
            std::vector<float> scratch(k::attend_block_scratch(rows));
            k::attend_block(b.queries.data(), 8, head.keys(DType::F32), head.values(DType::F32), head_dim, 0.125f,
                            scratch.data());
            double worst = 0.0;
            for (int i = 0; i < 8; ++i) {
                const k::AttentionQuery& q = b.queries[static_cast<size_t>(i)];
                std::vector<float> want(static_cast<size_t>(head_dim)), magnitude(want.size());
                k::ref::attend(q.q, head.k.data(), head.stride, head.v.data(), head.stride, q.kv_len, head_dim, 0.125f,
                               q.kv_valid, want.data(), scratch.data(), 0.0f, q.kv_start);
                k::ref::attend(q.q, head.k.data(), head.stride, abs_v.data(), head.stride, q.kv_len, head_dim, 0.125f,
                               q.kv_valid, magnitude.data(), scratch.data(), 0.0f, q.kv_start);
                for (int64_t d = 0; d < head_dim; ++d) {
                    if (kind == 3 && i == 1) {
                        REQUIRE(q.out[d] == 0.0f);
                        continue;
                    }
                    const double err = std::fabs(double{q.out[d]} - want[static_cast<size_t>(d)]);
                    worst = std::max(worst, err / (1e-6 * magnitude[static_cast<size_t>(d)]));
                }
            }
            INFO("worst error = " << worst << " x allowed");
            REQUIRE(worst <= 1.0);
        }
    }
}

namespace {

// One decode step (or a few tokens) of grouped-query attention over a cache
// of `rows` F16 rows, every row written before; the outputs of the graph op.
std::vector<float> decode_step(int64_t tokens, int64_t rows, int threads, Executor::Mode mode, int64_t window = 0) {
    constexpr int64_t kHeads = 12, kKvHeads = 2, kHeadDim = 64;
    const int64_t width = kKvHeads * kHeadDim;
    std::vector<uint16_t> k16, v16;
    for (float x : normal_floats(static_cast<size_t>(width * rows), 21)) k16.push_back(fp32_to_fp16(x));
    for (float x : normal_floats(static_cast<size_t>(width * rows), 22, 0.3f)) v16.push_back(fp32_to_fp16(x));
    Graph g;
    const NodeId q = g.input("q", DType::F32, Shape::of({kHeads * kHeadDim, tokens}));
    const NodeId pos = g.input("pos", DType::I32, Shape::of({tokens}));
    const NodeId kc = g.state("k", DType::F16, Shape::of({width, rows}), k16.data());
    const NodeId vc = g.state("v", DType::F16, Shape::of({width, rows}), v16.data());
    const NodeId out = ops::cached_attention(g, q, kc, vc, pos, kNoNode, kHeads, kKvHeads, kHeadDim, {0.125f, 0.0f, window});
    g.mark_output(out);
    const auto queries = normal_floats(static_cast<size_t>(kHeads * kHeadDim * tokens), 23);
    std::memcpy(g.node(q).data, queries.data(), queries.size() * sizeof(float));
    for (int64_t t = 0; t < tokens; ++t) g.node(pos).row<int32_t>(0)[t] = static_cast<int32_t>(rows - tokens + t);
    ThreadPool pool(threads);
    Executor(g, mode).run(pool);
    const Node& o = g.node(out);
    return {o.row(0), o.row(0) + o.shape.elements()};
}

}  // namespace

TEST_CASE("chunked attention: a decode step split over threads gives the same bits for any thread count",
          "[kernels][attention][threads]") {
    for (int64_t tokens : {1, 3}) {
        for (int64_t window : {0, 700}) {
            for (int64_t rows : {200, 1500}) {
                INFO("tokens=" << tokens << " window=" << window << " rows=" << rows);
                const std::vector<float> one = decode_step(tokens, rows, 1, Executor::Mode::Fast, window);
                for (int threads : {2, 3, 4, 5}) {
                    INFO("threads=" << threads);
                    const std::vector<float> many = decode_step(tokens, rows, threads, Executor::Mode::Fast, window);
                    REQUIRE(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
                }
                const std::vector<float> ref = decode_step(tokens, rows, 2, Executor::Mode::Reference, window);
                float worst = 0.0f;
                for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(one[i] - ref[i]));
                // Outputs are weighted means of values of unit scale: 1e-5 absolute
                // is ten times the 1e-6 relative bound above, and a wrong chunk
                // fold (a missed rescale, a dropped chunk) moves them by 1e-2 or more.
                REQUIRE(worst <= 1e-5f);
            }
        }
    }
}
