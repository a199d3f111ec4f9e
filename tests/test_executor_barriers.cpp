// The executor's barrier plan: a barrier only where a node depends on memory
// touched since the last one, and the results unchanged by leaving the others out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/graph/executor.h"
#include "engine/ops/ops.h"

using namespace kiln;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

}  // namespace

TEST_CASE("independent matmuls of one input share a barrier, their consumer waits", "[graph][barriers][threads]") {
    Graph g;
    const int64_t k = 64, m = 48, tokens = 5;
    const auto w1v = random_floats(static_cast<size_t>(k * m), 1), w2v = random_floats(static_cast<size_t>(k * m), 2);
    const NodeId x = g.input("x", DType::F32, Shape::of({k, tokens}));
    const NodeId w1 = g.weight("w1", DType::F32, Shape::of({k, m}), w1v.data());
    const NodeId w2 = g.weight("w2", DType::F32, Shape::of({k, m}), w2v.data());
    const NodeId a = ops::matmul(g, w1, x);
    const NodeId b = ops::matmul(g, w2, x);  // reads only x: runs beside a
    const NodeId c = ops::add(g, a, b);      // reads both: waits
    g.mark_output(c);
    Executor exec(g);
    CHECK(exec.barrier_count() == 1);

    const auto xv = random_floats(static_cast<size_t>(k * tokens), 3);
    std::memcpy(g.node(x).data, xv.data(), xv.size() * sizeof(float));
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        exec.run(pool);
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < m; ++r) {
                double want = 0;
                for (int64_t i = 0; i < k; ++i)
                    want += double(xv[static_cast<size_t>(t * k + i)]) *
                            (double(w1v[static_cast<size_t>(r * k + i)]) + w2v[static_cast<size_t>(r * k + i)]);
                REQUIRE(g.node(c).row(t)[r] == Approx(want).epsilon(1e-4).margin(1e-4));
            }
    }
}

TEST_CASE("a chain waits before every node, and reuse of a buffer still being read waits too", "[graph][barriers][threads]") {
    Graph g;
    const NodeId x = g.input("x", DType::F32, Shape::of({32, 3}));
    NodeId y = x;
    for (int i = 0; i < 6; ++i) y = ops::silu(g, y);  // each reads the one before
    g.mark_output(y);
    Executor chain(g);
    CHECK(chain.barrier_count() == 5);

    // d reads a last; e, independent of both, may be planned onto a's bytes:
    // then it must not start before d has finished reading them.
    Graph h;
    const NodeId in = h.input("in", DType::F32, Shape::of({32, 3}));
    const NodeId a = ops::silu(h, in);
    const NodeId d = ops::relu(h, a);   // a's last reader
    const NodeId e = ops::silu(h, in);  // independent of a and d, but may land on a's bytes
    const NodeId out = ops::add(h, d, e);
    h.mark_output(out);
    Executor reuse(h);  // plans h
    const Node& an = h.node(a);
    const Node& en = h.node(e);
    const bool e_reuses_a = en.data < an.data + an.bytes && an.data < en.data + en.bytes;
    REQUIRE(e_reuses_a);  // the planner takes the freed buffer: the case this test is about
    // d waits for a; e waits for d because it overwrites a's bytes; out waits.
    CHECK(reuse.barrier_count() == 3);

    const auto values = random_floats(32 * 3, 4);
    std::memcpy(h.node(in).data, values.data(), values.size() * sizeof(float));
    ThreadPool pool(2);
    reuse.run(pool);
    for (size_t i = 0; i < values.size(); ++i) {
        const double v = values[i], s = v / (1.0 + std::exp(-v));
        REQUIRE(h.node(out).row(0)[i] == Approx(std::max(s, 0.0) + s).epsilon(1e-5).margin(1e-6));
    }
}

TEST_CASE("run hooks see every step up to theirs finished while the threads go on", "[graph][barriers][threads]") {
    // a = w1 x, b = w2 x (beside a), c = a + b: a hook after b reads a and b
    // whole on thread 0 while the other threads compute c.
    Graph g;
    const int64_t k = 40, m = 36, tokens = 7;
    const auto w1v = random_floats(static_cast<size_t>(k * m), 4), w2v = random_floats(static_cast<size_t>(k * m), 5);
    const NodeId x = g.input("x", DType::F32, Shape::of({k, tokens}));
    const NodeId a = ops::matmul(g, g.weight("w1", DType::F32, Shape::of({k, m}), w1v.data()), x);
    const NodeId b = ops::matmul(g, g.weight("w2", DType::F32, Shape::of({k, m}), w2v.data()), x);
    const NodeId c = ops::add(g, a, b);
    g.mark_output(a);
    g.mark_output(b);
    g.mark_output(c);
    Executor exec(g);
    const size_t after_b = exec.step_of(b);
    REQUIRE(after_b != Executor::npos);
    CHECK(exec.step_of(a) < after_b);
    CHECK(exec.step_of(x) == Executor::npos);  // an input: no step computes it
    const auto xv = random_floats(static_cast<size_t>(k * tokens), 6);
    std::memcpy(g.node(x).data, xv.data(), xv.size() * sizeof(float));
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> seen;
        int calls = 0;
        RunHooks hooks{{after_b}, [&](size_t index) {
                           CHECK(index == 0);
                           ++calls;
                           for (NodeId id : {a, b}) {
                               const float* v = g.node(id).row(0);
                               seen.insert(seen.end(), v, v + m * tokens);
                           }
                       }};
        exec.run(pool, &hooks);
        CHECK(calls == 1);
        REQUIRE(seen.size() == static_cast<size_t>(2 * m * tokens));
        for (size_t i = 0; i < static_cast<size_t>(m * tokens); ++i) {
            CHECK(seen[i] == g.node(a).row(0)[i]);
            CHECK(seen[static_cast<size_t>(m * tokens) + i] == g.node(b).row(0)[i]);
            CHECK(g.node(c).row(0)[i] == seen[i] + seen[static_cast<size_t>(m * tokens) + i]);
        }
    }
}
