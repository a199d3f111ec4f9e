// The graph builder, the lifetime planner and the executor.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/graph/executor.h"
#include "engine/ops/ops.h"
#include "engine/quant/reference.h"

using namespace kiln;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

void fill(Graph& g, NodeId input, const std::vector<float>& values) {
    REQUIRE(g.node(input).bytes == values.size() * sizeof(float));
    std::memcpy(g.node(input).data, values.data(), g.node(input).bytes);
}

std::vector<float> read(const Graph& g, NodeId id) {
    const Node& n = g.node(id);
    return {n.row(0), n.row(0) + n.shape.elements()};
}

}  // namespace

TEST_CASE("shape errors name the op and both shapes", "[graph]") {
    Graph g;
    const NodeId a = g.input("a", DType::F32, Shape::of({4, 3}));
    const NodeId b = g.input("b", DType::F32, Shape::of({5, 3}));
    CHECK_THROWS_WITH(ops::add(g, a, b), Catch::Contains("add") && Catch::Contains("[4, 3]") && Catch::Contains("[5, 3]"));
    std::vector<float> w(6 * 7);
    const NodeId weights = g.weight("w", DType::F32, Shape::of({6, 7}), w.data());
    CHECK_THROWS_WITH(ops::matmul(g, weights, a),
                      Catch::Contains("matmul") && Catch::Contains("[6, 7]") && Catch::Contains("[4, 3]"));
    const NodeId ids = g.input("ids", DType::I32, Shape::of({3}));
    CHECK_THROWS_WITH(ops::rms_norm(g, ids, kNoNode, 1e-5f), Catch::Contains("rms_norm: the input must be f32, got i32"));
    CHECK_THROWS_WITH(ops::rope(g, a, ids, 3, 2, 2, 10000.0f), Catch::Contains("rope: rows of 4 are not 3 heads of 2"));
    CHECK_THROWS_WITH(Shape::of({3, 0}), Catch::Contains("must be positive"));
}

TEST_CASE("the planner reuses memory only after a buffer's last reader", "[graph]") {
    // A chain long enough that a planner without reuse needs far more memory.
    Graph g;
    const NodeId x = g.input("x", DType::F32, Shape::of({256, 4}));
    NodeId y = x;
    std::vector<NodeId> chain;
    for (int i = 0; i < 20; ++i) {
        y = ops::silu(g, ops::add(g, y, x));
        chain.push_back(y);
    }
    const NodeId keep = chain[3];  // read again at the very end: must survive the whole chain
    const NodeId out = ops::add(g, y, keep);
    g.mark_output(out);
    g.plan();
    CHECK(g.arena_bytes() * 4 < g.unplanned_bytes());

    // Every pair of nodes alive at the same time occupies disjoint memory.
    std::vector<size_t> last_read(g.size(), 0);
    for (size_t i = 0; i < g.size(); ++i)
        for (NodeId s : g.nodes()[i].src)
            if (s != kNoNode) last_read[static_cast<size_t>(s)] = i;
    last_read[static_cast<size_t>(out)] = g.size();
    for (size_t i = 0; i < g.size(); ++i) {
        const Node& a = g.nodes()[i];
        if (a.is_leaf()) continue;
        for (size_t j = i + 1; j < g.size(); ++j) {
            const Node& b = g.nodes()[j];
            if (b.is_leaf() || j > last_read[i]) continue;  // a is dead when b is written
            const bool disjoint = a.data + a.bytes <= b.data || b.data + b.bytes <= a.data;
            INFO("nodes " << i << " and " << j);
            REQUIRE(disjoint);
        }
    }

    // And the values are right: compare with a direct computation.
    const auto input = random_floats(256 * 4, 1);
    fill(g, x, input);
    ThreadPool pool(2);
    Executor(g).run(pool);
    std::vector<float> expect = input, kept;
    for (int i = 0; i < 20; ++i) {
        for (size_t k = 0; k < expect.size(); ++k) {
            const double s = double(expect[k]) + input[k];
            expect[k] = static_cast<float>(s / (1.0 + std::exp(-s)));
        }
        if (i == 3) kept = expect;
    }
    const auto got = read(g, out);
    for (size_t k = 0; k < expect.size(); ++k) REQUIRE(got[k] == Approx(expect[k] + kept[k]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("fast and reference forwards agree for every op, with 1 and 3 threads", "[graph][threads]") {
    for (DType weight_type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        const int64_t k = 96, m = 37, n = 5, heads = 4, kv_heads = 2, head_dim = 24, n_ctx = 16;
        const auto w_values = random_floats(static_cast<size_t>(k * m), 2);
        std::vector<std::byte> w(static_cast<size_t>(m) * row_bytes_of(weight_type, k));
        type_traits(weight_type).from_float_ref(w_values.data(), w.data(), k * m);
        const auto norm_w = random_floats(static_cast<size_t>(k), 3);
        const auto x_values = random_floats(static_cast<size_t>(k * n), 4);

        std::vector<std::vector<float>> results;
        for (auto [mode, threads] : {std::pair{Executor::Mode::Reference, 1}, std::pair{Executor::Mode::Fast, 1},
                                     std::pair{Executor::Mode::Fast, 3}}) {
            std::vector<float> k_cache(static_cast<size_t>(kv_heads * head_dim * n_ctx)), v_cache(k_cache.size());
            Graph g;
            const NodeId x = g.input("x", DType::F32, Shape::of({k, n}));
            const NodeId pos = g.input("pos", DType::I32, Shape::of({n}));
            const NodeId nw = g.weight("norm", DType::F32, Shape::of({k}), norm_w.data());
            const NodeId wm = g.weight("w", weight_type, Shape::of({k, m}), w.data());
            NodeId h = ops::rms_norm(g, x, nw, 1e-5f);
            h = ops::layer_norm(g, ops::gelu(g, h), nw, nw, 1e-5f);
            const NodeId y = ops::matmul(g, wm, ops::mul(g, h, nw));
            const NodeId q = ops::slice_rows(g, ops::rope(g, ops::scale(g, h, 0.5f), pos, heads, head_dim, 8, 10000.0f), 0, n);
            const NodeId kv = ops::rope(g, ops::slice_rows(g, ops::silu(g, q), 0, n), pos, heads, head_dim, 24, 500.0f);
            // Keys and values: a fixed projection down to the key/value heads.
            const NodeId kc = g.state("k", DType::F32, Shape::of({kv_heads * head_dim, n_ctx}), k_cache.data());
            const NodeId vc = g.state("v", DType::F32, Shape::of({kv_heads * head_dim, n_ctx}), v_cache.data());
            std::vector<float> half_w(static_cast<size_t>(k * kv_heads * head_dim));
            for (size_t i = 0; i < half_w.size(); ++i) half_w[i] = (i % 97 == 0) ? 1.0f : 0.01f * float(i % 13);
            const NodeId proj = g.weight("proj", DType::F32, Shape::of({k, kv_heads * head_dim}), half_w.data());
            const NodeId keys = ops::store_kv(g, kc, ops::matmul(g, proj, kv), pos);
            const NodeId values = ops::store_kv(g, vc, ops::relu(g, ops::matmul(g, proj, q)), pos);
            const NodeId att = ops::cached_attention(g, q, keys, values, pos, kNoNode, heads, kv_heads, head_dim);
            const NodeId out = ops::softmax(g, ops::add(g, ops::swiglu(g, att, att), att));
            g.mark_output(y);
            g.mark_output(out);
            fill(g, x, x_values);
            auto* p = reinterpret_cast<int32_t*>(g.node(pos).data);
            for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(3 + i);  // as if 3 tokens came before
            ThreadPool pool(threads);
            Executor(g, mode).run(pool);
            auto r = read(g, y);
            const auto o = read(g, out);
            r.insert(r.end(), o.begin(), o.end());
            results.push_back(r);
        }
        INFO("weights " << dtype_name(weight_type));
        // Reference vs fast: summation order differs, so close, not equal.
        for (size_t i = 0; i < results[0].size(); ++i)
            REQUIRE(results[1][i] == Approx(results[0][i]).epsilon(1e-4).margin(1e-4));
        // Threads only split rows: bit-identical.
        CHECK(results[1] == results[2]);
    }
}

TEST_CASE("a graph is planned once and runs many times", "[graph]") {
    Graph g;
    const NodeId x = g.input("x", DType::F32, Shape::of({7}));
    const NodeId y = ops::scale(g, x, 2.0f);
    g.mark_output(y);
    Executor exec(g);
    ThreadPool pool(2);
    for (int run = 0; run < 50; ++run) {
        std::vector<float> v(7, float(run));
        fill(g, x, v);
        exec.run(pool);
        REQUIRE(read(g, y) == std::vector<float>(7, 2.0f * run));
    }
    CHECK_THROWS_WITH(ops::scale(g, x, 1.0f), Catch::Contains("already planned"));
}

TEST_CASE("attention applies the causal limit, grouped heads and a per-token padding mask", "[graph]") {
    const int64_t heads = 4, kv_heads = 2, head_dim = 5, n_ctx = 8, n = 3;
    auto keys = random_floats(static_cast<size_t>(kv_heads * head_dim * n_ctx), 11);
    auto values = random_floats(keys.size(), 12);
    const auto queries = random_floats(static_cast<size_t>(heads * head_dim * n), 13);
    const std::vector<int32_t> positions{2, 5, 7};
    // Token 0 sees rows 0..2 but row 1 is padding; token 1 sees 0..5 minus 0 and 4;
    // token 2 has every row masked: its output must be zeros, not NaN.
    std::vector<int8_t> mask(static_cast<size_t>(n_ctx * n), 1);
    mask[1] = 0;
    mask[static_cast<size_t>(n_ctx) + 0] = 0;
    mask[static_cast<size_t>(n_ctx) + 4] = 0;
    for (int64_t j = 0; j < n_ctx; ++j) mask[static_cast<size_t>(2 * n_ctx + j)] = 0;

    Graph g;
    const NodeId q = g.input("q", DType::F32, Shape::of({heads * head_dim, n}));
    const NodeId pos = g.input("pos", DType::I32, Shape::of({n}));
    const NodeId m = g.input("mask", DType::I8, Shape::of({n_ctx, n}));
    const NodeId k = g.state("k", DType::F32, Shape::of({kv_heads * head_dim, n_ctx}), keys.data());
    const NodeId v = g.state("v", DType::F32, Shape::of({kv_heads * head_dim, n_ctx}), values.data());
    const NodeId out = ops::cached_attention(g, q, k, v, pos, m, heads, kv_heads, head_dim);
    g.mark_output(out);
    fill(g, q, queries);
    std::memcpy(g.node(pos).data, positions.data(), positions.size() * sizeof(int32_t));
    std::memcpy(g.node(m).data, mask.data(), mask.size());
    ThreadPool pool(2);
    Executor(g).run(pool);
    const auto got = read(g, out);

    // Expected, straight from the definition: softmax over the allowed rows of q·k/sqrt(d), then Σ p v.
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t kvh = h / (heads / kv_heads);
            std::vector<double> score;
            std::vector<int64_t> rows;
            for (int64_t j = 0; j <= positions[static_cast<size_t>(t)]; ++j) {
                if (mask[static_cast<size_t>(t * n_ctx + j)] == 0) continue;
                double s = 0;
                for (int64_t d = 0; d < head_dim; ++d)
                    s += double(queries[static_cast<size_t>(t * heads * head_dim + h * head_dim + d)]) *
                         keys[static_cast<size_t>(j * kv_heads * head_dim + kvh * head_dim + d)];
                score.push_back(s / std::sqrt(double(head_dim)));
                rows.push_back(j);
            }
            double top = -1e300, sum = 0;
            for (double s : score) top = std::max(top, s);
            for (double& s : score) sum += (s = std::exp(s - top));
            for (int64_t d = 0; d < head_dim; ++d) {
                double want = 0;
                for (size_t r = 0; r < rows.size(); ++r)
                    want += score[r] / sum * values[static_cast<size_t>(rows[r] * kv_heads * head_dim + kvh * head_dim + d)];
                const float have = got[static_cast<size_t>(t * heads * head_dim + h * head_dim + d)];
                INFO("token " << t << " head " << h << " dim " << d);
                REQUIRE(have == Approx(want).margin(1e-5));
            }
        }
    }
}
