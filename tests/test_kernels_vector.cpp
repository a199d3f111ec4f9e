// The xsimd row kernels (engine/kernels/vector.h) against their scalar twins
// (vector_ref.h), and both against PyTorch (tests/fixtures/ops/ops_reference.gguf,
// written by tests/reference/make_op_fixtures.py).
//
// Tolerances, fast vs ref (the ref evaluates in double and rounds once, so it
// is the exact function to within half a float ulp, 2^-24 relative):
//  - add, mul, scale, relu: bit-exact (one correctly rounded float op each).
//  - silu, gelu_tanh, gelu_erf, swiglu: |d| <= 1e-6 |ref| + 2^-24 |x|. The
//    relative part is ~17 float ulps: xsimd's exp is within 1.5 ulp and erfc
//    within ~7 ulp for the arguments that matter (measured on 2M points), plus
//    a few roundings of the argument and the gate. The absolute part is one
//    ulp-of-one of the gate times |x|: in the far negative tail the output is
//    tiny and its relative error grows with the argument (the rounding of
//    u = c (x + 0.044715 x^3) is amplified by e^-2u; erfc is 40-70 ulp off past
//    t = 5); 2^-24 |x| is the error any float32 evaluation of 0.5 x (1 + tanh u)
//    has there, torch's included.
//  - rms_norm: 1e-6 relative. layer_norm: 1e-6 (|ref| + |w| + |b|). The
//    normalized value z = (x - mean) / std is off by a few ulps of itself plus
//    a few ulps of one (the float mean is good to ~2^-24 std, which is large
//    relative to z where x is near the mean); then w and b are applied, and
//    |z w| <= |ref| + |b|.
//  - softmax: 1e-6 |ref| + 3e-8. x - max is rounded to float, which perturbs
//    p = e^-t / S by a relative t 2^-24; that is at most 2^-24 / e < 3e-8 absolute.
//  - rope: |d| <= 1e-6 (|x0| + |x1|) per pair: the rotation of a pair mixes
//    both members, so the error scales with the pair, not the output element.
//
// Fast and ref vs PyTorch: |d| <= 1e-5 max(1, |want|), i.e. absolute for
// values below 1 and relative above. The fixture's inputs are of unit scale and
// its outputs are torch's float64 results rounded to float32, so a correct
// kernel is ~1e-7 off; every mistake this is meant to catch (a wrong constant,
// eps or pair layout, a missing max-subtraction) is off by 1e-3 or more.
//
// Set KILN_TEST_REPORT=1 to print the largest error seen per check.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

namespace {

namespace k = kiln::kernels;

constexpr int64_t kSizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 257, 1000, 4099};
constexpr double kU = 0x1p-24;  // float unit roundoff
constexpr float kInf = std::numeric_limits<float>::infinity();

// std::mt19937's sequence is fixed by the standard, its distributions are not:
// the floats are derived here so every platform tests the same inputs.
class Rng {
public:
    explicit Rng(uint32_t seed) : gen_(seed) {}
    double uniform() { return (static_cast<double>(gen_()) + 0.5) / 4294967296.0; }
    double normal() {
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        return r * std::cos(6.283185307179586 * uniform());
    }
    std::vector<float> normals(int64_t n, double stddev, double mean = 0.0) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& f : v) f = static_cast<float>(mean + stddev * normal());
        return v;
    }
    int64_t below(int64_t n) { return static_cast<int64_t>(gen_() % static_cast<uint32_t>(n)); }

private:
    std::mt19937 gen_;
};

// Largest error seen, as a fraction of the error allowed; 1 is the limit.
struct Worst {
    std::string what;
    double ratio = 0.0;
    double err = 0.0;
    double rel = 0.0;  // err / |want| at the worst element
    int64_t at = -1;
    double got = 0.0, want = 0.0;

    void add(int64_t i, double g, double w, double allowed) {
        const double e = std::isnan(g) != std::isnan(w) ? kInf : (std::isnan(g) ? 0.0 : std::fabs(g - w));
        const double r = allowed > 0.0 ? e / allowed : (e > 0.0 ? kInf : 0.0);
        if (r > ratio || at < 0) {
            ratio = r, err = e, at = i, got = g, want = w;
            rel = w != 0.0 ? e / std::fabs(w) : 0.0;
        }
    }
    ~Worst() {
        if (std::getenv("KILN_TEST_REPORT") && at >= 0)
            std::printf("[report] %-40s max err %.3g (rel %.3g) = %.3f of allowed\n", what.c_str(), err, rel, ratio);
    }
};

#define REQUIRE_WITHIN(worst)                                                                                  \
    do {                                                                                                       \
        INFO((worst).what << ": worst at " << (worst).at << ": got " << (worst).got << ", want " << (worst).want \
                          << ", error " << (worst).err << " = " << (worst).ratio << " x allowed");             \
        REQUIRE((worst).ratio <= 1.0);                                                                         \
    } while (0)

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Inputs for the activations: normals of spread 4 with the awkward values
// (zeros, tiny, exp-overflow thresholds, huge) scattered over the row so that
// they land both in full batches and in tails.
std::vector<float> activation_inputs(Rng& rng, int64_t n) {
    std::vector<float> x = rng.normals(n, 4.0);
    const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 88.8f, -88.8f, 100.0f, -100.0f,
                              1e4f,  -1e4f, 1e30f, -1e30f, 8.0f,   -8.0f,  -12.0f};
    for (size_t s = 0; s < std::size(specials) && static_cast<int64_t>(s) < n; ++s)
        x[static_cast<size_t>(rng.below(n))] = specials[s];
    return x;
}

using Unary = void (*)(const float*, float*, int64_t) noexcept;

void check_unary(const char* name, Unary fast, Unary ref, bool exact, uint32_t seed) {
    Rng rng(seed);
    Worst worst{std::string(name) + " fast vs ref"};
    for (int64_t n : kSizes) {
        const std::vector<float> x = activation_inputs(rng, n);
        std::vector<float> want(x.size()), got(x.size()), inplace = x;
        ref(x.data(), want.data(), n);
        fast(x.data(), got.data(), n);
        fast(inplace.data(), inplace.data(), n);
        INFO(name << " n=" << n);
        REQUIRE(same_bits(got, inplace));  // in-place gives the same result
        if (exact) {
            REQUIRE(same_bits(got, want));
            continue;
        }
        for (int64_t i = 0; i < n; ++i) {
            REQUIRE(std::isfinite(got[i]));
            worst.add(i, got[i], want[i], 1e-6 * std::fabs(want[i]) + kU * std::fabs(x[i]));
        }
    }
    if (!exact) REQUIRE_WITHIN(worst);
}

// ---------------------------------------------------------------- fixture

const kiln::GgufFile& ops_fixture() {
    static const kiln::GgufFile file =
        kiln::GgufFile::open(kiln::test::fixtures_dir() / "ops" / "ops_reference.gguf");
    return file;
}

std::vector<float> fixture_f32(const std::string& name, std::vector<uint64_t> dims) {
    const kiln::GgufTensor& t = ops_fixture().get_tensor(name);
    INFO("fixture tensor " << name);
    REQUIRE(t.type == kiln::DType::F32);
    REQUIRE(t.dims == dims);
    std::vector<float> v(t.elements);
    REQUIRE(t.data.size() == v.size() * sizeof(float));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
}

std::vector<int32_t> fixture_i32(const std::string& name, uint64_t n) {
    const kiln::GgufTensor& t = ops_fixture().get_tensor(name);
    INFO("fixture tensor " << name);
    REQUIRE(t.type == kiln::DType::I32);
    REQUIRE(t.dims == std::vector<uint64_t>{n});
    std::vector<int32_t> v(n);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
}

float fixture_param(const std::string& key) {
    return static_cast<float>(ops_fixture().get_number("kiln.fixture." + key));
}

// Both kernels' outputs against the fixture's.
void check_fixture(const std::string& what, const std::vector<float>& fast, const std::vector<float>& ref,
                   const std::vector<float>& want) {
    Worst wf{what + " fast vs torch"}, wr{what + " ref vs torch"};
    REQUIRE(fast.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        const double allowed = 1e-5 * std::max(1.0, std::fabs(static_cast<double>(want[i])));
        wf.add(static_cast<int64_t>(i), fast[i], want[i], allowed);
        wr.add(static_cast<int64_t>(i), ref[i], want[i], allowed);
    }
    REQUIRE_WITHIN(wf);
    REQUIRE_WITHIN(wr);
}

// Runs a row kernel over every row of a (rows x n) fixture input.
using RowFn = std::function<void(const float* x, float* out, int64_t row)>;
std::vector<float> per_row(const std::vector<float>& x, uint64_t n, const RowFn& f) {
    std::vector<float> out(x.size());
    for (uint64_t r = 0; r < x.size() / n; ++r) f(x.data() + r * n, out.data() + r * n, static_cast<int64_t>(r));
    return out;
}

}  // namespace

// ---------------------------------------------------------------- fast vs ref

TEST_CASE("vector: add, mul, scale and relu are bit-exact, in place too", "[kernels][vector]") {
    Rng rng(1);
    for (int64_t n : kSizes) {
        INFO("n=" << n);
        const std::vector<float> a = rng.normals(n, 3.0), b = rng.normals(n, 3.0);
        std::vector<float> want(a.size()), got(a.size());
        const struct {
            void (*fast)(const float*, const float*, float*, int64_t) noexcept;
            void (*ref)(const float*, const float*, float*, int64_t) noexcept;
        } binary[] = {{k::add, k::ref::add}, {k::mul, k::ref::mul}};
        for (const auto& op : binary) {
            op.ref(a.data(), b.data(), want.data(), n);
            op.fast(a.data(), b.data(), got.data(), n);
            REQUIRE(same_bits(got, want));
            std::vector<float> io = a;  // out == first input
            op.fast(io.data(), b.data(), io.data(), n);
            REQUIRE(same_bits(io, want));
            io = b;  // out == second input
            op.fast(a.data(), io.data(), io.data(), n);
            REQUIRE(same_bits(io, want));
        }
        k::ref::scale(a.data(), -0.37f, want.data(), n);
        k::scale(a.data(), -0.37f, got.data(), n);
        REQUIRE(same_bits(got, want));
        std::vector<float> io = a;
        k::scale(io.data(), -0.37f, io.data(), n);
        REQUIRE(same_bits(io, want));
    }
    check_unary("relu", k::relu, k::ref::relu, true, 2);
    const float odd[] = {std::nanf(""), -0.0f, 0.0f, -kInf, kInf, -1e-45f};
    float out[6];
    k::relu(odd, out, 6);
    CHECK(std::isnan(out[0]));  // NaN propagates, as torch.relu
    CHECK(out[1] == 0.0f);
    CHECK(out[3] == 0.0f);
    CHECK(out[4] == kInf);
    CHECK(out[5] == 0.0f);
}

TEST_CASE("vector: silu, gelu_tanh, gelu_erf within tolerance of the reference", "[kernels][vector]") {
    check_unary("silu", k::silu, k::ref::silu, false, 3);
    check_unary("gelu_tanh", k::gelu_tanh, k::ref::gelu_tanh, false, 4);
    check_unary("gelu_erf", k::gelu_erf, k::ref::gelu_erf, false, 5);
}

TEST_CASE("vector: swiglu within tolerance of the reference, in place on either input", "[kernels][vector]") {
    Rng rng(6);
    Worst worst{"swiglu fast vs ref"};
    for (int64_t n : kSizes) {
        INFO("n=" << n);
        const std::vector<float> gate = activation_inputs(rng, n), up = rng.normals(n, 2.0);
        std::vector<float> want(gate.size()), got(gate.size());
        k::ref::swiglu(gate.data(), up.data(), want.data(), n);
        k::swiglu(gate.data(), up.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            REQUIRE(std::isfinite(got[i]));
            worst.add(i, got[i], want[i], 1e-6 * std::fabs(want[i]) + kU * std::fabs(gate[i] * up[i]));
        }
        std::vector<float> io = gate;
        k::swiglu(io.data(), up.data(), io.data(), n);
        REQUIRE(same_bits(io, got));
        io = up;
        k::swiglu(gate.data(), io.data(), io.data(), n);
        REQUIRE(same_bits(io, got));
    }
    REQUIRE_WITHIN(worst);
}

TEST_CASE("vector: activations stay finite and exact at huge inputs", "[kernels][vector]") {
    const float x[] = {1e4f, -1e4f, 1e30f, -1e30f, 3e38f, -3e38f, 88.8f, -88.8f, 0.0f};
    const int64_t n = static_cast<int64_t>(std::size(x));
    float silu[std::size(x)], gt[std::size(x)], ge[std::size(x)];
    k::silu(x, silu, n);
    k::gelu_tanh(x, gt, n);
    k::gelu_erf(x, ge, n);
    for (int64_t i = 0; i < n; ++i) {
        INFO("x=" << x[i]);
        REQUIRE(std::isfinite(silu[i]));
        REQUIRE(std::isfinite(gt[i]));
        REQUIRE(std::isfinite(ge[i]));
        if (std::fabs(x[i]) >= 1e4f) {  // the gate is exactly 1 or 0 there
            const float want = x[i] > 0 ? x[i] : 0.0f;
            CHECK(silu[i] == want);
            CHECK(gt[i] == want);
            CHECK(ge[i] == want);
        }
    }
}

TEST_CASE("vector: rms_norm within 1e-6 relative of the reference up to n = 8192", "[kernels][vector]") {
    Rng rng(7);
    Worst worst{"rms_norm fast vs ref"};
    std::vector<int64_t> sizes(std::begin(kSizes), std::end(kSizes));
    sizes.push_back(8192);
    for (int64_t n : sizes) {
        for (double spread : {1e-3, 1.0, 1e3}) {  // 1e-3: mean square ~ eps, so eps matters
            const std::vector<float> x = rng.normals(n, spread, 0.5 * spread);
            const std::vector<float> w = rng.normals(n, 0.5, 1.0);
            for (float eps : {1e-5f, 1e-6f}) {
                for (const float* weight : {static_cast<const float*>(nullptr), w.data()}) {
                    INFO("n=" << n << " spread=" << spread << " eps=" << eps << " weight=" << (weight != nullptr));
                    std::vector<float> want(x.size()), got(x.size()), io = x;
                    k::ref::rms_norm(x.data(), weight, eps, want.data(), n);
                    k::rms_norm(x.data(), weight, eps, got.data(), n);
                    k::rms_norm(io.data(), weight, eps, io.data(), n);
                    REQUIRE(same_bits(io, got));
                    for (int64_t i = 0; i < n; ++i) worst.add(i, got[i], want[i], 1e-6 * std::fabs(want[i]));
                    REQUIRE_WITHIN(worst);
                }
            }
        }
    }
}

TEST_CASE("vector: layer_norm within tolerance of the reference, large means included", "[kernels][vector]") {
    Rng rng(8);
    Worst worst{"layer_norm fast vs ref"};
    std::vector<int64_t> sizes(std::begin(kSizes), std::end(kSizes));
    sizes.push_back(8192);
    const struct {
        double spread, mean;
    } shapes[] = {{1.0, 0.0}, {2.0, 0.75}, {2e-3, 3.0}, {1e3, -5e3}, {1e-3, 0.0}};
    for (int64_t n : sizes) {
        for (const auto& shape : shapes) {
            const std::vector<float> x = rng.normals(n, shape.spread, shape.mean);
            const std::vector<float> w = rng.normals(n, 0.5, 1.0), b = rng.normals(n, 0.5);
            for (int combo = 0; combo < 4; ++combo) {
                const float* weight = combo & 1 ? w.data() : nullptr;
                const float* bias = combo & 2 ? b.data() : nullptr;
                INFO("n=" << n << " spread=" << shape.spread << " mean=" << shape.mean << " weight=" << (combo & 1)
                          << " bias=" << (combo & 2));
                std::vector<float> want(x.size()), got(x.size()), io = x;
                k::ref::layer_norm(x.data(), weight, bias, 1e-5f, want.data(), n);
                k::layer_norm(x.data(), weight, bias, 1e-5f, got.data(), n);
                k::layer_norm(io.data(), weight, bias, 1e-5f, io.data(), n);
                REQUIRE(same_bits(io, got));
                for (int64_t i = 0; i < n; ++i) {
                    const double wi = weight ? std::fabs(weight[i]) : 1.0;
                    const double bi = bias ? std::fabs(bias[i]) : 0.0;
                    worst.add(i, got[i], want[i], 1e-6 * (std::fabs(want[i]) + wi + bi));
                }
                REQUIRE_WITHIN(worst);
            }
        }
    }
}

TEST_CASE("vector: softmax within tolerance of the reference, large and masked inputs", "[kernels][vector]") {
    Rng rng(9);
    Worst worst{"softmax fast vs ref"};
    Worst sums{"softmax |sum - 1|"};
    const float large[] = {1e4f, -1e4f, 88.8f, 88.0f, 1e30f, -1e30f, 3e29f, -kInf};
    for (int64_t n : kSizes) {
        for (int variant = 0; variant < 4; ++variant) {
            std::vector<float> x = rng.normals(n, variant == 1 ? 30.0 : 3.0);
            if (variant >= 2)  // a few large entries at random places
                for (int s = 0; s < 3; ++s) x[static_cast<size_t>(rng.below(n))] = large[rng.below(variant == 2 ? 4 : 8)];
            INFO("n=" << n << " variant=" << variant);
            std::vector<float> want(x.size()), got(x.size()), io = x;
            k::ref::softmax(x.data(), want.data(), n);
            k::softmax(x.data(), got.data(), n);
            k::softmax(io.data(), io.data(), n);
            REQUIRE(same_bits(io, got));
            double sum = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                REQUIRE(std::isfinite(got[i]));
                worst.add(i, got[i], want[i], 1e-6 * std::fabs(want[i]) + 3e-8);
                sum += got[i];
            }
            sums.add(n, sum, 1.0, 1e-6);
        }
    }
    REQUIRE_WITHIN(worst);
    REQUIRE_WITHIN(sums);
}

TEST_CASE("vector: softmax of equal, all -1e30 and all -inf rows", "[kernels][vector]") {
    for (int64_t n : kSizes) {
        INFO("n=" << n);
        std::vector<float> x(static_cast<size_t>(n), -1e30f), got(x.size()), want(x.size());
        k::softmax(x.data(), got.data(), n);
        k::ref::softmax(x.data(), want.data(), n);
        REQUIRE(same_bits(got, want));
        REQUIRE(got[0] == static_cast<float>(1.0 / static_cast<double>(n)));
        std::fill(x.begin(), x.end(), -kInf);  // fully masked: zeros, not NaN
        k::softmax(x.data(), got.data(), n);
        for (float v : got) REQUIRE(v == 0.0f);
        x[static_cast<size_t>(n - 1)] = 5.0f;  // only the last entry survives
        k::softmax(x.data(), got.data(), n);
        REQUIRE(got[static_cast<size_t>(n - 1)] == 1.0f);
        for (int64_t i = 0; i + 1 < n; ++i) REQUIRE(got[i] == 0.0f);
    }
}

TEST_CASE("vector: rope within tolerance of the double-precision reference", "[kernels][vector]") {
    Rng rng(10);
    Worst worst{"rope fast vs ref"};
    const struct {
        int64_t n_heads, head_dim, n_rot;
        float base;
    } shapes[] = {
        {1, 2, 2, 10000.0f},    {3, 16, 16, 10000.0f},   {5, 64, 64, 10000.0f},   {7, 128, 64, 10000.0f},
        {3, 6, 4, 10000.0f},    {1, 34, 34, 10000.0f},   {5, 80, 48, 500000.0f},  {3, 128, 128, 1e6f},
        {1, 520, 516, 10000.0f},  // > 128 pairs: the angle table is built in chunks
        {9, 65, 30, 10000.0f},  // odd head_dim: heads start at odd offsets
    };
    const int64_t positions[] = {0, 1, 2, 17, 1000, 4095, 4096, 100000};
    for (const auto& s : shapes) {
        for (int64_t pos : positions) {
            INFO("heads=" << s.n_heads << " head_dim=" << s.head_dim << " n_rot=" << s.n_rot << " pos=" << pos);
            const int64_t n = s.n_heads * s.head_dim;
            std::vector<float> x = rng.normals(n + 3, 1.0);  // 3 sentinels past the last head
            std::vector<float> want = x, got = x;
            k::ref::rope(want.data(), s.n_heads, s.head_dim, s.n_rot, pos, s.base);
            k::rope(got.data(), s.n_heads, s.head_dim, s.n_rot, pos, s.base);
            for (int64_t h = 0; h < s.n_heads; ++h) {
                for (int64_t d = 0; d < s.head_dim; ++d) {
                    const int64_t i = h * s.head_dim + d;
                    if (d >= s.n_rot) {  // not rotated: untouched, bit for bit
                        REQUIRE(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(x[i]));
                        REQUIRE(std::bit_cast<uint32_t>(want[i]) == std::bit_cast<uint32_t>(x[i]));
                        continue;
                    }
                    const int64_t pair = i - (d & 1);
                    worst.add(i, got[i], want[i], 1e-6 * (std::fabs(x[pair]) + std::fabs(x[pair + 1])));
                }
            }
            for (int64_t i = n; i < n + 3; ++i) REQUIRE(got[i] == x[i]);
            if (pos == 0) REQUIRE(same_bits(got, x));  // angle 0: cos 1, sin 0, exactly the input
            REQUIRE_WITHIN(worst);
        }
    }
}

TEST_CASE("vector: softcap within a few float roundings of the double reference", "[kernels][vector]") {
    Rng rng(13);
    Worst worst{"softcap fast vs ref"};
    for (const float cap : {0.5f, 30.0f, 50.0f}) {
        for (int64_t n : {1, 7, 16, 33, 1001}) {
            std::vector<float> x = rng.normals(n, 3.0 * cap);
            x[0] = 1e-20f;  // tiny: cap * tanh(x / cap) = x
            std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
            k::softcap(x.data(), cap, got.data(), n);
            k::ref::softcap(x.data(), cap, want.data(), n);
            for (int64_t i = 0; i < n; ++i) {
                REQUIRE(std::fabs(want[i]) <= cap);
                worst.add(i, got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-30);
            }
            REQUIRE_WITHIN(worst);
        }
    }
}

TEST_CASE("vector: NEOX, scaled and factored rope within tolerance of the reference", "[kernels][vector]") {
    Rng rng(11);
    Worst worst{"rope (spec) fast vs ref"};
    struct Case {
        const char* what;
        k::RopeSpec spec;
        bool factors;
    };
    const auto spec = [](int64_t heads, int64_t head_dim, int64_t n_rot, float base, k::RopeStyle style) {
        k::RopeSpec s;
        s.n_heads = heads, s.head_dim = head_dim, s.n_rot = n_rot, s.freq_base = base, s.style = style;
        return s;
    };
    std::vector<Case> cases;
    for (k::RopeStyle style : {k::RopeStyle::Adjacent, k::RopeStyle::Neox}) {
        cases.push_back({"plain", spec(3, 64, 64, 10000.0f, style), false});
        cases.push_back({"partial", spec(5, 80, 48, 500000.0f, style), false});
        cases.push_back({"odd head", spec(9, 65, 30, 10000.0f, style), false});
        cases.push_back({"long", spec(1, 520, 516, 10000.0f, style), true});
        Case linear{"linear", spec(4, 64, 64, 10000.0f, style), true};
        linear.spec.freq_scale = 0.25f;
        cases.push_back(linear);
        Case yarn{"yarn", spec(4, 128, 128, 1e6f, style), true};
        yarn.spec.freq_scale = 0.125f, yarn.spec.ext_factor = 1.0f, yarn.spec.n_ctx_orig = 4096;
        yarn.spec.attn_factor = 0.9f;
        cases.push_back(yarn);
    }
    for (const Case& c : cases) {
        const k::RopeSpec& s = c.spec;
        std::vector<float> factors;
        for (int64_t i = 0; i < s.n_rot / 2; ++i) factors.push_back(1.0f + static_cast<float>(i % 7) * 0.75f);
        for (int64_t pos : {0, 1, 17, 4095, 100000}) {
            INFO(c.what << " style=" << static_cast<int>(s.style) << " pos=" << pos);
            const int64_t n = s.n_heads * s.head_dim;
            std::vector<float> x = rng.normals(n + 3, 1.0);
            std::vector<float> want = x, got = x;
            const float* ff = c.factors ? factors.data() : nullptr;
            k::ref::rope(want.data(), s, pos, ff);
            k::rope(got.data(), s, pos, ff);
            const double mag = k::rope_magnitude(s);
            for (int64_t i = 0; i < n; ++i) {
                const int64_t d = i % s.head_dim;
                if (d >= s.n_rot) {
                    REQUIRE(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(x[i]));
                    continue;
                }
                const int64_t half = s.n_rot / 2;
                const int64_t other = s.style == k::RopeStyle::Neox ? (d < half ? i + half : i - half)
                                                                     : (d % 2 == 0 ? i + 1 : i - 1);
                worst.add(i, got[i], want[i], 1e-6 * mag * (std::fabs(x[i]) + std::fabs(x[other])));
            }
            for (int64_t i = n; i < n + 3; ++i) REQUIRE(got[i] == x[i]);
            REQUIRE_WITHIN(worst);
        }
    }
}

TEST_CASE("vector: rope styles, linear scaling and frequency factors agree with their definitions",
          "[kernels][vector]") {
    Rng rng(12);
    const int64_t heads = 3, head_dim = 40, n_rot = 32, half = n_rot / 2, n = heads * head_dim;
    k::RopeSpec adjacent;
    adjacent.n_heads = heads, adjacent.head_dim = head_dim, adjacent.n_rot = n_rot, adjacent.freq_base = 10000.0f;
    k::RopeSpec neox = adjacent;
    neox.style = k::RopeStyle::Neox;
    // NEOX pairs (i, i + half) are the adjacent pairs of the head with its first
    // n_rot values interleaved: permute, rotate adjacent, permute back.
    const std::vector<float> x = rng.normals(n, 1.0);
    std::vector<float> by_neox = x, interleaved = x;
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
            interleaved[h * head_dim + 2 * i] = x[h * head_dim + i];
            interleaved[h * head_dim + 2 * i + 1] = x[h * head_dim + i + half];
        }
    k::ref::rope(by_neox.data(), neox, 1234, nullptr);
    k::ref::rope(interleaved.data(), adjacent, 1234, nullptr);
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
            CHECK(by_neox[h * head_dim + i] == interleaved[h * head_dim + 2 * i]);
            CHECK(by_neox[h * head_dim + i + half] == interleaved[h * head_dim + 2 * i + 1]);
        }
    // Linear scaling by 1/4 at position 4p, and factors of 4 at 4p, are the plain rope at p.
    k::RopeSpec linear = neox;
    linear.freq_scale = 0.25f;
    const std::vector<float> fours(static_cast<size_t>(half), 4.0f);
    for (const bool by_factor : {false, true}) {
        std::vector<float> scaled = x, plain = x;
        if (by_factor)
            k::rope(scaled.data(), neox, 4 * 777, fours.data());
        else
            k::rope(scaled.data(), linear, 4 * 777, nullptr);
        k::rope(plain.data(), neox, 777, nullptr);
        for (int64_t i = 0; i < n; ++i) CHECK(std::fabs(scaled[i] - plain[i]) <= 1e-6 * (std::fabs(plain[i]) + 1e-3));
    }
}

// ---------------------------------------------------------------- PyTorch fixture

TEST_CASE("vector fixture: activations match PyTorch", "[kernels][vector][fixture]") {
    const struct {
        const char* name;
        Unary fast, ref;
    } ops[] = {{"silu", k::silu, k::ref::silu}, {"gelu", k::gelu_tanh, k::ref::gelu_tanh}, {"relu", k::relu, k::ref::relu}};
    for (const auto& op : ops) {
        const std::string name = op.name;
        const std::vector<float> x = fixture_f32(name + ".x", {67, 3});
        const std::vector<float> want = fixture_f32(name + ".out", {67, 3});
        const auto fast = per_row(x, 67, [&](const float* r, float* o, int64_t) { op.fast(r, o, 67); });
        const auto ref = per_row(x, 67, [&](const float* r, float* o, int64_t) { op.ref(r, o, 67); });
        check_fixture(name, fast, ref, want);
    }
    const std::vector<float> gate = fixture_f32("swiglu.gate", {67, 2}), up = fixture_f32("swiglu.up", {67, 2});
    const std::vector<float> want = fixture_f32("swiglu.out", {67, 2});
    std::vector<float> fast(want.size()), ref(want.size());
    k::swiglu(gate.data(), up.data(), fast.data(), 2 * 67);
    k::ref::swiglu(gate.data(), up.data(), ref.data(), 2 * 67);
    check_fixture("swiglu", fast, ref, want);
}

TEST_CASE("vector fixture: rms_norm and layer_norm match PyTorch", "[kernels][vector][fixture]") {
    for (const auto& [name, n] : {std::pair<std::string, uint64_t>{"rms_norm_a", 67}, {"rms_norm_b", 64}}) {
        const std::vector<float> x = fixture_f32(name + ".x", {n, 4});
        const std::vector<float> w = fixture_f32(name + ".weight", {n});
        const std::vector<float> want = fixture_f32(name + ".out", {n, 4});
        const float eps = fixture_param(name + ".eps");
        const int64_t len = static_cast<int64_t>(n);
        check_fixture(name,
                      per_row(x, n, [&](const float* r, float* o, int64_t) { k::rms_norm(r, w.data(), eps, o, len); }),
                      per_row(x, n, [&](const float* r, float* o, int64_t) { k::ref::rms_norm(r, w.data(), eps, o, len); }),
                      want);
    }
    const std::vector<float> x = fixture_f32("layer_norm.x", {67, 4});
    const std::vector<float> w = fixture_f32("layer_norm.weight", {67}), b = fixture_f32("layer_norm.bias", {67});
    const std::vector<float> want = fixture_f32("layer_norm.out", {67, 4});
    const float eps = fixture_param("layer_norm.eps");
    check_fixture(
        "layer_norm", per_row(x, 67, [&](const float* r, float* o, int64_t) { k::layer_norm(r, w.data(), b.data(), eps, o, 67); }),
        per_row(x, 67, [&](const float* r, float* o, int64_t) { k::ref::layer_norm(r, w.data(), b.data(), eps, o, 67); }),
        want);
}

TEST_CASE("vector fixture: softmax of large logits matches PyTorch", "[kernels][vector][fixture]") {
    const std::vector<float> x = fixture_f32("softmax.x", {37, 7});
    const std::vector<float> want = fixture_f32("softmax.out", {37, 7});
    check_fixture("softmax", per_row(x, 37, [](const float* r, float* o, int64_t) { k::softmax(r, o, 37); }),
                  per_row(x, 37, [](const float* r, float* o, int64_t) { k::ref::softmax(r, o, 37); }), want);
}

TEST_CASE("vector fixture: rope matches PyTorch", "[kernels][vector][fixture]") {
    const struct {
        const char* name;
        uint64_t n_tokens, n_heads, head_dim;
    } cases[] = {{"rope_a", 5, 3, 16}, {"rope_b", 4, 5, 24}};
    for (const auto& c : cases) {
        const std::string name = c.name;
        const std::vector<float> x = fixture_f32(name + ".x", {c.head_dim, c.n_heads, c.n_tokens});
        const std::vector<int32_t> pos = fixture_i32(name + ".pos", c.n_tokens);
        const std::vector<float> want = fixture_f32(name + ".out", {c.head_dim, c.n_heads, c.n_tokens});
        const auto n_rot = static_cast<int64_t>(ops_fixture().get_int("kiln.fixture." + name + ".n_rot"));
        const float base = fixture_param(name + ".freq_base");
        const uint64_t row = c.n_heads * c.head_dim;  // one token: all its heads
        const auto rotate = [&](auto fn) {
            return per_row(x, row, [&](const float* r, float* o, int64_t t) {
                std::memcpy(o, r, row * sizeof(float));
                fn(o, static_cast<int64_t>(c.n_heads), static_cast<int64_t>(c.head_dim), n_rot, pos[static_cast<size_t>(t)], base);
            });
        };
        using Plain = void (*)(float*, int64_t, int64_t, int64_t, int64_t, float) noexcept;
        check_fixture(name, rotate(static_cast<Plain>(k::rope)), rotate(static_cast<Plain>(k::ref::rope)), want);
    }
}
