// Reverse-mode autodiff: every op's backward rule against central finite
// differences, and every training kernel's fast path against its reference.
//
// Finite differences run the float graph (reference kernels) at x ± h and form
// (f(x+h) - f(x-h)) / 2h with f = Σ r ⊙ output summed in double. With h = 1e-2
// the truncation error is h²·f'''/6 ≈ 2e-5 for these smooth O(1) functions and
// the float rounding of f (≈ 1e-7 · Σ|r·y| ≤ 1e-5 for the sizes here) adds
// < 1e-3 after dividing by 2h; so 3e-3 · (1 + |g|) separates a right gradient
// from a wrong one (a wrong rule is off by O(|g|)).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>

#include "engine/graph/executor.h"
#include "engine/ops/ops.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/autodiff.h"
#include "engine/train/rng.h"

using namespace kiln;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

struct Param {
    std::string name;
    Shape shape;
    std::vector<float> values;
};

Param param(std::string name, std::initializer_list<int64_t> dims, uint32_t seed, float scale = 1.0f) {
    const Shape s = Shape::of(dims);
    return {std::move(name), s, random_floats(static_cast<size_t>(s.elements()), seed, scale)};
}

// Builds the graph under test from the parameter nodes; may add inputs it fills itself.
using Builder = std::function<NodeId(Graph&, const std::vector<NodeId>&)>;

struct Rig {
    Graph g;
    std::vector<NodeId> params, grads;
    NodeId output = kNoNode, seed = kNoNode;

    Rig(std::vector<Param>& ps, const Builder& build, uint32_t seed_values) {
        for (Param& p : ps) params.push_back(g.state(p.name, DType::F32, p.shape, p.values.data()));
        output = build(g, params);
        seed = g.input("seed", DType::F32, g.node(output).shape);
        const auto r = random_floats(static_cast<size_t>(g.node(output).shape.elements()), seed_values);
        std::memcpy(g.node(seed).data, r.data(), r.size() * sizeof(float));
        grads = train::append_backward(g, output, seed, params);
    }
    std::vector<float> values(NodeId id) const {
        const Node& n = g.node(id);
        return {n.row(0), n.row(0) + n.shape.elements()};
    }
    double objective() const {
        const Node& o = g.node(output);
        const Node& r = g.node(seed);
        double f = 0.0;
        for (int64_t i = 0; i < o.shape.elements(); ++i) f += static_cast<double>(o.row(0)[i]) * r.row(0)[i];
        return f;
    }
};

void check_gradients(std::vector<Param> ps, const Builder& build, double h = 1e-2, double tolerance = 3e-3) {
    Rig rig(ps, build, 99);
    ThreadPool pool(1);
    Executor exec(rig.g, Executor::Mode::Reference);
    exec.run(pool);
    std::vector<std::vector<float>> analytic;
    for (NodeId d : rig.grads) analytic.push_back(rig.values(d));
    for (size_t p = 0; p < ps.size(); ++p) {
        std::vector<float>& v = ps[p].values;
        const size_t stride = std::max<size_t>(1, v.size() / 40);  // at most ~40 probes per parameter
        for (size_t i = 0; i < v.size(); i += stride) {
            const float saved = v[i];
            v[i] = static_cast<float>(saved + h);
            exec.run(pool);
            const double plus = rig.objective();
            v[i] = static_cast<float>(saved - h);
            exec.run(pool);
            const double minus = rig.objective();
            v[i] = saved;
            const double numeric = (plus - minus) / (2.0 * h);
            INFO("parameter " << ps[p].name << " element " << i << ": analytic " << analytic[p][i] << ", numeric "
                              << numeric);
            REQUIRE(std::abs(analytic[p][i] - numeric) <= tolerance * (1.0 + std::abs(numeric)));
        }
    }
}

// The whole forward + backward graph in reference mode (1 thread) and in fast
// mode (1 and 3 threads): gradients close to the reference, and the thread
// count changes nothing.
void check_fast_path(std::vector<Param> ps, const Builder& build, double tolerance = 2e-4) {
    std::vector<std::vector<std::vector<float>>> runs;
    for (auto [mode, threads] : {std::pair{Executor::Mode::Reference, 1}, std::pair{Executor::Mode::Fast, 1},
                                 std::pair{Executor::Mode::Fast, 3}}) {
        Rig rig(ps, build, 7);
        ThreadPool pool(threads);
        Executor(rig.g, mode).run(pool);
        std::vector<std::vector<float>> out{rig.values(rig.output)};
        for (NodeId d : rig.grads) out.push_back(rig.values(d));
        runs.push_back(std::move(out));
    }
    for (size_t t = 0; t < runs[0].size(); ++t) {
        double scale = 0.0;
        for (float x : runs[0][t]) scale = std::max(scale, static_cast<double>(std::abs(x)));
        for (size_t i = 0; i < runs[0][t].size(); ++i) {
            INFO("tensor " << t << " element " << i);
            REQUIRE(std::abs(runs[1][t][i] - runs[0][t][i]) <= tolerance * std::max(1.0, scale));
        }
        CHECK(runs[1][t] == runs[2][t]);
    }
}

NodeId ids_input(Graph& g, std::vector<int32_t> ids) {
    const NodeId n = g.input("ids", DType::I32, Shape::of({static_cast<int64_t>(ids.size())}));
    std::memcpy(g.node(n).data, ids.data(), ids.size() * sizeof(int32_t));
    return n;
}

// Values kept away from 0, where relu's derivative jumps.
Param away_from_zero(Param p) {
    for (float& x : p.values) x = x >= 0 ? x + 0.1f : x - 0.1f;
    return p;
}

}  // namespace

TEST_CASE("element-wise backward rules match finite differences", "[train][autodiff]") {
    SECTION("add, also of a broadcast row") {
        check_gradients({param("a", {7, 5}, 1), param("b", {7, 5}, 2), param("row", {7}, 3)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::add(g, ops::add(g, p[0], p[1]), p[2]); });
    }
    SECTION("mul, also of a broadcast row") {
        check_gradients({param("a", {7, 5}, 1), param("b", {7, 5}, 2), param("row", {7}, 3)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::mul(g, ops::mul(g, p[0], p[1]), p[2]); });
    }
    SECTION("scale") {
        check_gradients({param("x", {5, 3}, 4)}, [](Graph& g, const std::vector<NodeId>& p) { return ops::scale(g, p[0], -1.7f); });
    }
    SECTION("relu") {
        check_gradients({away_from_zero(param("x", {9, 3}, 5))},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::relu(g, p[0]); });
    }
    SECTION("gelu (tanh)") {
        check_gradients({param("x", {9, 3}, 6, 2.0f)}, [](Graph& g, const std::vector<NodeId>& p) { return ops::gelu(g, p[0]); });
    }
    SECTION("gelu (erf)") {
        check_gradients({param("x", {9, 3}, 7, 2.0f)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::gelu_erf(g, p[0]); });
    }
    SECTION("a node read twice sums both gradients") {
        check_gradients({param("x", {5, 3}, 8)}, [](Graph& g, const std::vector<NodeId>& p) {
            return ops::add(g, ops::mul(g, p[0], p[0]), ops::gelu(g, p[0]));
        });
    }
    SECTION("dropout with a fixed seed") {
        check_gradients({param("x", {13, 5}, 9)}, [](Graph& g, const std::vector<NodeId>& p) {
            const NodeId seed = ids_input(g, {12345, 678});
            return ops::dropout(g, ops::gelu(g, p[0]), seed, 0.3f);
        });
    }
}

TEST_CASE("row, column and layout backward rules match finite differences", "[train][autodiff]") {
    SECTION("get_rows scatter-adds repeated ids") {
        check_gradients({param("table", {6, 11}, 10)}, [](Graph& g, const std::vector<NodeId>& p) {
            return ops::get_rows(g, p[0], ids_input(g, {3, 0, 10, 3, 7, 3, 10}));
        });
    }
    SECTION("slice_rows") {
        check_gradients({param("x", {5, 9}, 11)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::slice_rows(g, p[0], 2, 5); });
    }
    SECTION("transpose") {
        check_gradients({param("x", {5, 3}, 12)}, [](Graph& g, const std::vector<NodeId>& p) { return ops::transpose(g, p[0]); });
    }
    SECTION("slice_columns, pad_columns, pad_rows") {
        check_gradients({param("x", {9, 4}, 13)}, [](Graph& g, const std::vector<NodeId>& p) {
            const NodeId s = ops::slice_columns(g, p[0], 2, 5);
            return ops::pad_rows(g, ops::pad_columns(g, ops::gelu(g, s), 1, 8), 2, 7);
        });
    }
}

TEST_CASE("norm, softmax and matmul backward rules match finite differences", "[train][autodiff]") {
    SECTION("layer_norm with weight and bias") {
        check_gradients({param("x", {7, 5}, 15), param("w", {7}, 16), param("b", {7}, 17)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::layer_norm(g, p[0], p[1], p[2], 1e-5f); });
    }
    SECTION("layer_norm without weight") {
        check_gradients({param("x", {9, 4}, 18)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::layer_norm(g, p[0], kNoNode, kNoNode, 1e-5f); });
    }
    SECTION("softmax") {
        check_gradients({param("x", {7, 4}, 19)}, [](Graph& g, const std::vector<NodeId>& p) { return ops::softmax(g, p[0]); });
    }
    SECTION("matmul: weights and activations") {
        check_gradients({param("w", {9, 5}, 20, 0.5f), param("x", {9, 7}, 21, 0.5f)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::matmul(g, p[0], p[1]); });
    }
}

TEST_CASE("Llama's backward rules match finite differences: rms_norm, silu, swiglu, rope", "[train][autodiff]") {
    SECTION("rms_norm with weight") {
        check_gradients({param("x", {12, 5}, 71), param("w", {12}, 72)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::rms_norm(g, p[0], p[1], 1e-5f); });
    }
    SECTION("rms_norm without weight, one element per row") {
        check_gradients({param("x", {1, 3}, 73)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::rms_norm(g, p[0], kNoNode, 1e-2f); });
    }
    SECTION("silu") {
        check_gradients({param("x", {9, 4}, 74, 3.0f)}, [](Graph& g, const std::vector<NodeId>& p) { return ops::silu(g, p[0]); });
    }
    SECTION("swiglu: gate and up") {
        check_gradients({param("gate", {7, 3}, 75, 2.0f), param("up", {7, 3}, 76)},
                        [](Graph& g, const std::vector<NodeId>& p) { return ops::swiglu(g, p[0], p[1]); });
    }
    SECTION("rope on 3 heads of 4 with 2 rotated dimensions, positions far apart") {
        check_gradients({param("x", {12, 4}, 77)}, [](Graph& g, const std::vector<NodeId>& p) {
            return ops::rope(g, p[0], ids_input(g, {0, 5, 17, 1000}), 3, 4, 2, 10000.0f);
        });
    }
    SECTION("rope of every dimension, twice (the inverse of the inverse)") {
        check_gradients({param("x", {8, 3}, 78)}, [](Graph& g, const std::vector<NodeId>& p) {
            const NodeId pos = ids_input(g, {3, 1, 4});
            return ops::rope(g, ops::rope(g, p[0], pos, 2, 4, 4, 500.0f), pos, 2, 4, 4, 500.0f);
        });
    }
}

TEST_CASE("cross-entropy backward matches finite differences, ignoring padding", "[train][autodiff]") {
    check_gradients({param("logits", {11, 7}, 22, 2.0f)}, [](Graph& g, const std::vector<NodeId>& p) {
        return ops::cross_entropy(g, p[0], ids_input(g, {3, -1, 10, 0, 3, 5, -1}), -1);
    });
}

TEST_CASE("sequence attention backward matches finite differences", "[train][autodiff]") {
    SECTION("causal self-attention, 2 sequences of 5, 2 heads of 3") {
        check_gradients({param("q", {6, 10}, 23), param("k", {6, 10}, 24), param("v", {6, 10}, 25)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            return ops::sequence_attention(g, p[0], p[1], p[2], kNoNode, 2, 2, 3, 2, true);
                        });
    }
    SECTION("cross-attention with 4 keys per sequence and padding") {
        check_gradients({param("q", {6, 6}, 26), param("k", {6, 8}, 27), param("v", {6, 8}, 28)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId mask = g.input("mask", DType::I8, Shape::of({4, 2}));
                            const int8_t valid[8] = {1, 1, 1, 1, 1, 1, 0, 0};
                            std::memcpy(g.node(mask).data, valid, sizeof valid);
                            return ops::sequence_attention(g, p[0], p[1], p[2], mask, 2, 2, 3, 2, false);
                        });
    }
}

TEST_CASE("grouped-query sequence attention backward matches finite differences", "[train][autodiff]") {
    SECTION("causal, 4 query heads sharing 2 key/value heads of 3, 2 sequences of 5") {
        check_gradients({param("q", {12, 10}, 61), param("k", {6, 10}, 62), param("v", {6, 10}, 63)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            return ops::sequence_attention(g, p[0], p[1], p[2], kNoNode, 4, 2, 3, 2, true);
                        });
    }
    SECTION("6 query heads on 1 key/value head, padding and attention dropout") {
        check_gradients({param("q", {12, 6}, 64), param("k", {2, 8}, 65), param("v", {2, 8}, 66)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId mask = g.input("mask", DType::I8, Shape::of({4, 2}));
                            const int8_t valid[8] = {1, 1, 1, 0, 1, 1, 1, 1};
                            std::memcpy(g.node(mask).data, valid, sizeof valid);
                            const NodeId seed = ids_input(g, {7, 8});
                            return ops::sequence_attention(g, p[0], p[1], p[2], mask, 6, 1, 2, 2, false, 0.25f, seed);
                        });
    }
}

TEST_CASE("grouped-query sequence attention equals attention with each key/value head repeated", "[train]") {
    // 4 query heads on 2 key/value heads = 4 heads whose keys and values are
    // the shared ones copied: outputs equal, and dK, dV are the copies' sums.
    const int64_t D = 3, T = 5, B = 2;
    std::vector<float> q(12 * T * B), k(6 * T * B), v(6 * T * B), k4(12 * T * B), v4(12 * T * B), dO(12 * T * B);
    train::Rng rng(5);
    for (float* a : {q.data(), k.data(), v.data(), dO.data()})
        for (size_t i = 0; i < (a == k.data() || a == v.data() ? k.size() : q.size()); ++i)
            a[i] = static_cast<float>(rng.normal());
    for (int64_t r = 0; r < T * B; ++r)
        for (int64_t h = 0; h < 4; ++h)
            for (int64_t d = 0; d < D; ++d) {
                k4[r * 12 + h * D + d] = k[r * 6 + (h / 2) * D + d];
                v4[r * 12 + h * D + d] = v[r * 6 + (h / 2) * D + d];
            }
    const auto run = [&](int64_t kv_heads, std::vector<float>& keys, std::vector<float>& values, Executor::Mode mode) {
        Graph g;
        const auto leaf = [&](const char* name, std::vector<float>& data, int64_t width) {
            return g.state(name, DType::F32, Shape::of({width, T * B}), data.data());
        };
        const NodeId qn = leaf("q", q, 12), kn = leaf("k", keys, kv_heads * D), vn = leaf("v", values, kv_heads * D);
        const NodeId a = ops::sequence_attention(g, qn, kn, vn, kNoNode, 4, kv_heads, D, B, true);
        const NodeId grad = g.state("dO", DType::F32, Shape::of({12, T * B}), dO.data());
        const NodeId all = ops::sequence_attention_grad(g, a, grad);
        g.mark_output(a);
        g.mark_output(all);
        g.plan();
        ThreadPool pool(2);
        Executor(g, mode).run(pool);
        const Node& an = g.node(a);
        const Node& gn = g.node(all);
        std::vector<float> out(an.row(0), an.row(0) + 12 * T * B);
        std::vector<float> dk(static_cast<size_t>(T * B * kv_heads * D)), dv(dk.size());
        for (int64_t r = 0; r < T * B; ++r)
            for (int64_t c = 0; c < kv_heads * D; ++c) {
                dk[r * kv_heads * D + c] = gn.row(T * B + r)[c];
                dv[r * kv_heads * D + c] = gn.row(2 * T * B + r)[c];
            }
        return std::tuple{out, dk, dv};
    };
    for (Executor::Mode mode : {Executor::Mode::Fast, Executor::Mode::Reference}) {
        const auto [out2, dk2, dv2] = run(2, k, v, mode);
        const auto [out4, dk4, dv4] = run(4, k4, v4, mode);
        CHECK(out2 == out4);
        for (int64_t r = 0; r < T * B; ++r)
            for (int64_t h = 0; h < 2; ++h)
                for (int64_t d = 0; d < D; ++d) {
                    const auto i2 = static_cast<size_t>(r * 6 + h * D + d);
                    const auto a = static_cast<size_t>(r * 12 + 2 * h * D + d), b = a + static_cast<size_t>(D);
                    CHECK(dk2[i2] == Approx(dk4[a] + dk4[b]).margin(1e-6));
                    CHECK(dv2[i2] == Approx(dv4[a] + dv4[b]).margin(1e-6));
                }
    }
}

TEST_CASE("sequence attention with attention dropout: backward matches finite differences with a fixed seed", "[train][autodiff]") {
    // The mask is fixed by the seed, so the output is smooth in q, k, v.
    SECTION("causal self-attention, 2 sequences of 5, 2 heads of 3") {
        check_gradients({param("q", {6, 10}, 51), param("k", {6, 10}, 52), param("v", {6, 10}, 53)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId seed = ids_input(g, {4242, -7});
                            return ops::sequence_attention(g, p[0], p[1], p[2], kNoNode, 2, 2, 3, 2, true, 0.3f, seed);
                        });
    }
    SECTION("two cross-attentions with padding, one seed") {
        check_gradients({param("q", {6, 6}, 54), param("k", {6, 8}, 55), param("v", {6, 8}, 56)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId mask = g.input("mask", DType::I8, Shape::of({4, 2}));
                            const int8_t valid[8] = {1, 1, 1, 1, 1, 1, 0, 0};
                            std::memcpy(g.node(mask).data, valid, sizeof valid);
                            const NodeId seed = ids_input(g, {99, 100});
                            const NodeId a = ops::sequence_attention(g, p[0], p[1], p[2], mask, 2, 2, 3, 2, false, 0.4f, seed);
                            return ops::sequence_attention(g, a, p[1], p[2], mask, 2, 2, 3, 2, false, 0.4f, seed);
                        });
    }
}

TEST_CASE("autodiff refuses ops without a backward rule and parameters that do not matter", "[train][autodiff]") {
    std::vector<float> a(6), b(6);
    Graph g;
    const NodeId x = g.state("x", DType::F32, Shape::of({3, 2}), a.data());
    const NodeId unused = g.state("unused", DType::F32, Shape::of({3, 2}), b.data());
    const NodeId y = ops::silu_grad(g, x, x);  // a gradient op: not differentiated again
    const NodeId seed = g.input("seed", DType::F32, Shape::of({3, 2}));
    const NodeId ids[] = {x};
    CHECK_THROWS_WITH(train::append_backward(g, y, seed, ids), Catch::Contains("silu_grad has no backward rule"));
    Graph g2;
    const NodeId x2 = g2.state("x", DType::F32, Shape::of({3, 2}), a.data());
    const NodeId u2 = g2.state("unused", DType::F32, Shape::of({3, 2}), b.data());
    const NodeId y2 = ops::gelu(g2, x2);
    const NodeId s2 = g2.input("seed", DType::F32, Shape::of({3, 2}));
    const NodeId both[] = {x2, u2};
    CHECK_THROWS_WITH(train::append_backward(g2, y2, s2, both), Catch::Contains("unused does not influence"));
    (void)unused;
}

TEST_CASE("training kernels: fast paths agree with the references on odd sizes, with 1 and 3 threads", "[train][autodiff][threads]") {
    SECTION("element-wise, norms, softmax, matmul, rows") {
        check_fast_path({param("x", {131, 37}, 30), param("w", {131, 67}, 31, 0.1f), param("nw", {131}, 32),
                         param("nb", {131}, 33), param("table", {131, 29}, 34), param("row", {67}, 35)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId emb = ops::get_rows(g, p[4], ids_input(g, std::vector<int32_t>(37, 0)));
                            NodeId h = ops::add(g, p[0], emb);
                            h = ops::layer_norm(g, h, p[2], p[3], 1e-5f);
                            NodeId y = ops::add(g, ops::matmul(g, p[1], h), p[5]);  // [67, 37]
                            y = ops::add(g, ops::gelu(g, y), ops::gelu_erf(g, ops::mul(g, y, p[5])));
                            y = ops::add(g, ops::relu(g, y), ops::scale(g, ops::softmax(g, y), 3.0f));
                            const NodeId t = ops::transpose(g, y);  // [37, 67]
                            return ops::pad_columns(g, ops::slice_columns(g, t, 3, 29), 1, 33);
                        });
    }
    SECTION("get_rows with many ids") {
        check_fast_path({param("table", {45, 23}, 36)}, [](Graph& g, const std::vector<NodeId>& p) {
            std::vector<int32_t> ids(101);
            for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % 23);
            return ops::get_rows(g, p[0], ids_input(g, ids));
        });
    }
    SECTION("cross-entropy over a wide vocabulary") {
        check_fast_path({param("logits", {517, 23}, 37, 3.0f)}, [](Graph& g, const std::vector<NodeId>& p) {
            std::vector<int32_t> t(23);
            for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 37) % 517);
            t[5] = -100;
            return ops::cross_entropy(g, p[0], ids_input(g, t), -100);
        });
    }
    SECTION("sequence attention, causal and cross with padding") {
        check_fast_path({param("q", {5 * 7, 3 * 13}, 38), param("k", {5 * 7, 3 * 13}, 39), param("v", {5 * 7, 3 * 13}, 40),
                         param("k2", {5 * 7, 3 * 11}, 41), param("v2", {5 * 7, 3 * 11}, 42)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId mask = g.input("mask", DType::I8, Shape::of({11, 3}));
                            auto* m = reinterpret_cast<int8_t*>(g.node(mask).data);
                            for (int i = 0; i < 33; ++i) m[i] = (i % 11) < 11 - (i / 11) * 3 ? 1 : 0;
                            const NodeId a = ops::sequence_attention(g, p[0], p[1], p[2], kNoNode, 5, 5, 7, 3, true);
                            return ops::sequence_attention(g, a, p[3], p[4], mask, 5, 5, 7, 3, false);
                        });
    }
    SECTION("sequence attention with attention dropout, causal and cross with padding") {
        check_fast_path({param("q", {5 * 7, 3 * 13}, 44), param("k", {5 * 7, 3 * 13}, 45), param("v", {5 * 7, 3 * 13}, 46),
                         param("k2", {5 * 7, 3 * 11}, 47), param("v2", {5 * 7, 3 * 11}, 48)},
                        [](Graph& g, const std::vector<NodeId>& p) {
                            const NodeId mask = g.input("mask", DType::I8, Shape::of({11, 3}));
                            auto* m = reinterpret_cast<int8_t*>(g.node(mask).data);
                            for (int i = 0; i < 33; ++i) m[i] = (i % 11) < 11 - (i / 11) * 3 ? 1 : 0;
                            const NodeId seed = ids_input(g, {5, 6});
                            const NodeId a = ops::sequence_attention(g, p[0], p[1], p[2], kNoNode, 5, 5, 7, 3, true, 0.2f, seed);
                            return ops::sequence_attention(g, a, p[3], p[4], mask, 5, 5, 7, 3, false, 0.35f, seed);
                        });
    }
    SECTION("dropout masks do not depend on threads") {
        check_fast_path({param("x", {67, 31}, 43)}, [](Graph& g, const std::vector<NodeId>& p) {
            return ops::dropout(g, p[0], ids_input(g, {7, 9}), 0.25f);
        });
    }
}

TEST_CASE("dropout drops about p of the elements and scales the rest", "[train]") {
    std::vector<float> ones(100 * 100, 1.0f);
    Graph g;
    const NodeId x = g.state("x", DType::F32, Shape::of({100, 100}), ones.data());
    const NodeId seed = ids_input(g, {1, 2});
    const NodeId y = ops::dropout(g, x, seed, 0.2f);
    const NodeId other = ops::dropout(g, x, seed, 0.2f);  // same seed and shape, its own mask
    g.mark_output(y);
    g.mark_output(other);
    ThreadPool pool(2);
    Executor(g).run(pool);
    int64_t dropped = 0, differ = 0;
    for (int64_t i = 0; i < 10000; ++i) {
        const float v = g.node(y).row(0)[i];
        if (v == 0.0f) ++dropped;
        else REQUIRE(v == Approx(1.25f));
        differ += (v == 0.0f) != (g.node(other).row(0)[i] == 0.0f) ? 1 : 0;
    }
    CHECK(dropped > 1800);  // 2000 expected; sd 40
    CHECK(dropped < 2200);
    CHECK(differ > 2400);  // independent masks differ in 2 p (1 - p) = 32% of the elements (sd 47)
    CHECK(ops::dropout(g, x, seed, 0.0f) == x);  // p = 0 adds no node
}

// With all queries 0 every allowed key has probability 1/S, and with value
// row j = e_j the output of query i is row i of P ⊙ F: each element is 0
// (dropped) or exactly 1/(S(1-p)) (kept, rescaled). Over 4 sequences × 3
// heads × 40 queries × 40 keys = 19200 probabilities about p are dropped, and
// the masks of two attention nodes on one seed differ.
TEST_CASE("attention dropout drops about p of the probabilities and scales the rest", "[train]") {
    constexpr int64_t S = 40, heads = 3, batch = 4;
    constexpr float p = 0.3f;
    std::vector<float> zeros(static_cast<size_t>(heads * S * batch * S), 0.0f), values(zeros.size(), 0.0f);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < S; ++j)
            for (int64_t h = 0; h < heads; ++h) values[static_cast<size_t>((b * S + j) * heads * S + h * S + j)] = 1.0f;
    for (auto mode : {Executor::Mode::Fast, Executor::Mode::Reference}) {
        Graph g;
        const Shape shape = Shape::of({heads * S, batch * S});
        const NodeId q = g.state("q", DType::F32, shape, zeros.data());
        const NodeId v = g.state("v", DType::F32, shape, values.data());
        const NodeId seed = ids_input(g, {31, 41});
        const NodeId first = ops::sequence_attention(g, q, q, v, kNoNode, heads, heads, S, batch, false, p, seed);
        const NodeId second = ops::sequence_attention(g, q, q, v, kNoNode, heads, heads, S, batch, false, p, seed);
        g.mark_output(first);
        g.mark_output(second);
        g.plan();
        ThreadPool pool(2);
        Executor(g, mode).run(pool);
        int64_t dropped = 0, differ = 0;
        const float kept = 1.0f / (static_cast<float>(S) * (1.0f - p));
        for (int64_t i = 0; i < shape.elements(); ++i) {
            const float y = g.node(first).row(0)[i];
            if (y == 0.0f) ++dropped;
            else REQUIRE(y == Approx(kept).epsilon(1e-6));
            differ += (y == 0.0f) != (g.node(second).row(0)[i] == 0.0f) ? 1 : 0;
        }
        CHECK(dropped > 5760 - 4 * 64);  // 19200 p = 5760 expected; sd sqrt(19200 p (1-p)) ≈ 64
        CHECK(dropped < 5760 + 4 * 64);
        CHECK(differ > 19200 * 2 * p * (1 - p) / 2);  // independent masks differ in 2p(1-p) of the elements
    }
    Graph g;
    const NodeId q = g.state("q", DType::F32, Shape::of({heads * S, batch * S}), zeros.data());
    CHECK_THROWS_WITH(ops::sequence_attention(g, q, q, q, kNoNode, heads, heads, S, batch, false, 0.1f, kNoNode),
                      Catch::Contains("needs a seed input"));
    CHECK_THROWS_WITH(ops::sequence_attention(g, q, q, q, kNoNode, heads, heads, S, batch, false, 1.0f, ids_input(g, {1, 2})),
                      Catch::Contains("outside [0, 1)"));
}
