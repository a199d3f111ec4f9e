// An F16 KV cache (llama.cpp's default cache type and the tools' default; the
// library's is F32 unless asked):
// the cache write rounds each value to the nearest half, and attention over it
// must give exactly what attention over an F32 cache holding those rounded
// values gives. On a real model the F16 cache stays close to the F32 one, and
// slots and reorder (beam search) work on it as on F32.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/core/half.h"
#include "engine/graph/executor.h"
#include "engine/models/architectures.h"
#include "engine/models/sequence_slots.h"
#include "engine/ops/ops.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"

using namespace kiln;

namespace {

std::vector<float> normal_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

struct AttentionRun {
    std::vector<float> out;
    std::vector<uint16_t> k_half;  // the F16 cache's key bytes (F16 runs only)
};

// New key/value rows stored at `positions` by store_kv, then grouped-query
// attention of the queries over the cache (causal limit and a padding mask).
AttentionRun attend_over_cache(DType cache_type, const std::vector<float>& keys, const std::vector<float>& values,
                               Executor::Mode mode, int threads) {
    const int64_t heads = 4, kv_heads = 2, head_dim = 37, n_ctx = 12, n = 9;
    const int64_t width = kv_heads * head_dim;
    const std::vector<int32_t> positions{0, 1, 2, 3, 4, 5, 6, 9, 11};
    std::vector<int8_t> mask(static_cast<size_t>(n_ctx * n), 1);
    mask[static_cast<size_t>(5 * n_ctx + 2)] = 0;  // token 5 does not see row 2
    const auto queries = normal_floats(static_cast<size_t>(heads * head_dim * n), 3);
    const size_t elem = cache_type == DType::F16 ? 2 : 4;
    std::vector<std::byte> k_cache(static_cast<size_t>(width * n_ctx) * elem), v_cache(k_cache.size());

    Graph g;
    const NodeId q = g.input("q", DType::F32, Shape::of({heads * head_dim, n}));
    const NodeId k_new = g.input("k_new", DType::F32, Shape::of({width, n}));
    const NodeId v_new = g.input("v_new", DType::F32, Shape::of({width, n}));
    const NodeId pos = g.input("pos", DType::I32, Shape::of({n}));
    const NodeId m = g.input("mask", DType::I8, Shape::of({n_ctx, n}));
    const NodeId kc = g.state("k", cache_type, Shape::of({width, n_ctx}), k_cache.data());
    const NodeId vc = g.state("v", cache_type, Shape::of({width, n_ctx}), v_cache.data());
    const NodeId ks = ops::store_kv(g, kc, k_new, pos);
    const NodeId vs = ops::store_kv(g, vc, v_new, pos);
    const NodeId out = ops::cached_attention(g, q, ks, vs, pos, m, heads, kv_heads, head_dim);
    g.mark_output(out);
    std::memcpy(g.node(q).data, queries.data(), queries.size() * sizeof(float));
    std::memcpy(g.node(k_new).data, keys.data(), keys.size() * sizeof(float));
    std::memcpy(g.node(v_new).data, values.data(), values.size() * sizeof(float));
    std::memcpy(g.node(pos).data, positions.data(), positions.size() * sizeof(int32_t));
    std::memcpy(g.node(m).data, mask.data(), mask.size());
    ThreadPool pool(threads);
    Executor(g, mode).run(pool);
    AttentionRun r;
    const Node& o = g.node(out);
    r.out.assign(o.row(0), o.row(0) + o.shape.elements());
    if (cache_type == DType::F16) {
        r.k_half.resize(k_cache.size() / 2);
        std::memcpy(r.k_half.data(), k_cache.data(), k_cache.size());
    }
    return r;
}

std::shared_ptr<const GgufFile> stories() {
    return std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

}  // namespace

TEST_CASE("F16 KV cache: attention equals an F32 cache holding the rounded rows, bit for bit", "[kvcache]") {
    const size_t count = 2 * 37 * 9;
    const auto keys = normal_floats(count, 1), values = normal_floats(count, 2);
    std::vector<float> keys_rounded(count), values_rounded(count);
    for (size_t i = 0; i < count; ++i) {
        keys_rounded[i] = fp16_to_fp32(fp32_to_fp16(keys[i]));
        values_rounded[i] = fp16_to_fp32(fp32_to_fp16(values[i]));
    }
    for (auto [mode, threads] : {std::pair{Executor::Mode::Fast, 1}, std::pair{Executor::Mode::Fast, 3},
                                 std::pair{Executor::Mode::Reference, 2}}) {
        INFO((mode == Executor::Mode::Fast ? "fast" : "reference") << ", " << threads << " threads");
        const AttentionRun half = attend_over_cache(DType::F16, keys, values, mode, threads);
        const AttentionRun full = attend_over_cache(DType::F32, keys_rounded, values_rounded, mode, threads);
        REQUIRE(std::memcmp(half.out.data(), full.out.data(), half.out.size() * sizeof(float)) == 0);
        // The cache holds the rounded halves: token 7 went to row 9.
        for (int64_t d = 0; d < 2 * 37; ++d)
            REQUIRE(half.k_half[static_cast<size_t>(9 * 74 + d)] == fp32_to_fp16(keys[static_cast<size_t>(7 * 74 + d)]));
        // And rounding mattered: the unrounded F32 cache differs somewhere.
        const AttentionRun exact = attend_over_cache(DType::F32, keys, values, mode, threads);
        CHECK(std::memcmp(half.out.data(), exact.out.data(), half.out.size() * sizeof(float)) != 0);
    }
}

// Tolerance: halves keep 11 significant bits, so each cached value moves by at
// most 2^-12 of itself. On stories260K's 10-token prompt that moved the logits
// by at most 0.0115, measured when this test was written;
// 0.05 leaves room and still catches a wrong row, head or conversion (those
// move logits by 1 or more).
TEST_CASE("F16 KV cache on a real model: close to F32, same greedy text, slots and forks work", "[kvcache]") {
    const auto lm = load_causal_lm(stories());
    ThreadPool pool(2);
    const std::vector<int32_t> prompt{1, 403, 407, 261, 378, 66, 285, 343, 278, 259};
    auto full = lm->new_session(96, 1, Executor::Mode::Fast, DType::F32);
    auto half = lm->new_session(96, 1, Executor::Mode::Fast, DType::F16);
    const auto a = full->eval(prompt, pool, true);
    const std::vector<float> full_logits(a.begin(), a.end());
    const auto b = half->eval(prompt, pool, true);
    CHECK(max_abs_diff(full_logits, b) < 0.05f);
    CHECK(max_abs_diff(full_logits, b) > 0.0f);  // the cache really is F16

    // Greedy continuation for 64 tokens: the same text.
    auto argmax = [&](std::span<const float> l) {
        const auto vocab = static_cast<size_t>(lm->info().n_vocab);
        return static_cast<int32_t>(std::max_element(l.end() - static_cast<std::ptrdiff_t>(vocab), l.end()) -
                                    (l.end() - static_cast<std::ptrdiff_t>(vocab)));
    };
    int32_t tf = argmax(full_logits), th = argmax(b);
    for (int step = 0; step < 64; ++step) {
        REQUIRE(tf == th);
        const std::vector<int32_t> next{tf};
        tf = argmax(full->eval(next, pool));
        th = argmax(half->eval(next, pool));
    }

    // Three slots of an F16 cache: slot 0 forks into 1 and 2, all continue
    // with different tokens, each equal to a fresh F16 run of its sequence.
    auto slots = lm->new_session(32, 3, Executor::Mode::Fast, DType::F16);
    slots->eval(prompt, pool);
    const std::vector<int32_t> parents{0, 0, 0};
    slots->reorder(parents);
    const std::vector<int32_t> tokens{7, 8, 9}, which{0, 1, 2};
    const auto forked = slots->eval_slots(tokens, which, pool);
    const auto vocab = static_cast<size_t>(lm->info().n_vocab);
    for (size_t s = 0; s < 3; ++s) {
        auto fresh = lm->new_session(32, 1, Executor::Mode::Fast, DType::F16);
        std::vector<int32_t> seq = prompt;
        seq.push_back(tokens[s]);
        const auto want = fresh->eval(seq, pool);
        CHECK(max_abs_diff(want, forked.subspan(s * vocab, vocab)) < 1e-4f);
    }
}

TEST_CASE("KV caches of types no kernel reads are refused with a clear message", "[kvcache]") {
    CHECK_THROWS_WITH(SequenceSlots(1, 32, 1, 4, DType::Q4_1), Catch::Contains("key cache of type q4_1 is not supported"));
    const auto lm = load_causal_lm(stories());
    CHECK_THROWS_WITH(lm->new_session(16, 1, Executor::Mode::Fast, {DType::F16, DType::Q5_0}),
                      Catch::Contains("not supported (f32, f16, bf16, q8_0 and q4_0 are)"));
}
