// kernels::attend (xsimd) against ref::attend (double precision), and both
// against PyTorch (tests/fixtures/ops/ops_reference.gguf, written by
// tests/reference/make_op_fixtures.py).
//
// Tolerance, fast vs ref: |d| <= 1e-6 Σ_j p_j |v_j[d]|, i.e. 1e-6 relative to
// the magnitude of the weighted sum that forms out[d] (computed by ref::attend
// on |v|). Relative to out[d] itself would be meaningless where the terms
// cancel to nearly zero. The float errors are the dot products (a few ulps of
// Σ|q_i k_ij| ~ 8 at unit-normal data and scale 1/sqrt(head_dim)), exp and the
// value sum, which the kernel flushes into double every 64 keys.
//
// Fast and ref vs PyTorch: |d| <= 1e-5 max(1, |want|): the fixture's values
// are of unit scale (absolute below 1, relative above), its outputs are torch's
// float64 results rounded to float32, and the slips this is meant to catch
// (wrong kv head for a query head, scale after the softmax, an off-by-one in
// the causal length, masked keys leaking in) move outputs by 1e-2 or more.
//
// Set KILN_TEST_REPORT=1 to print the largest error seen per check.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/kernels/attention.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

namespace {

namespace k = kiln::kernels;

constexpr float kSentinel = -12345.5f;

// std::mt19937's sequence is fixed by the standard, its distributions are not.
class Rng {
public:
    explicit Rng(uint32_t seed) : gen_(seed) {}
    double uniform() { return (static_cast<double>(gen_()) + 0.5) / 4294967296.0; }
    float normal() {
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        return static_cast<float>(r * std::cos(6.283185307179586 * uniform()));
    }

private:
    std::mt19937 gen_;
};

struct Worst {
    std::string what;
    double ratio = 0.0, err = 0.0, got = 0.0, want = 0.0;
    int64_t at = -1;

    void add(int64_t i, double g, double w, double allowed) {
        const double e = std::isnan(g) || std::isnan(w) ? std::numeric_limits<double>::infinity() : std::fabs(g - w);
        const double r = allowed > 0.0 ? e / allowed : (e > 0.0 ? std::numeric_limits<double>::infinity() : 0.0);
        if (r > ratio || at < 0) ratio = r, err = e, at = i, got = g, want = w;
    }
    ~Worst() {
        if (std::getenv("KILN_TEST_REPORT") && at >= 0)
            std::printf("[report] %-40s max err %.3g = %.3f of allowed\n", what.c_str(), err, ratio);
    }
};

#define REQUIRE_WITHIN(worst)                                                                                  \
    do {                                                                                                       \
        INFO((worst).what << ": worst at " << (worst).at << ": got " << (worst).got << ", want " << (worst).want \
                          << ", error " << (worst).err << " = " << (worst).ratio << " x allowed");             \
        REQUIRE((worst).ratio <= 1.0);                                                                         \
    } while (0)

enum class Mask { none, random, all_masked, only_last };

const char* mask_name(Mask m) {
    switch (m) {
        case Mask::none: return "none";
        case Mask::random: return "random";
        case Mask::all_masked: return "all masked";
        case Mask::only_last: return "only last valid";
    }
    return "?";
}

// One attention problem laid out like a KV cache slice: key/value rows
// `stride` floats apart (more than head_dim, and odd, so rows are unaligned).
struct Problem {
    int64_t head_dim = 0, kv_len = 0;
    size_t stride = 0;
    float scale = 1.0f;
    float softcap = 0.0f;  // > 0: capped scores
    int64_t kv_start = 0;  // a sliding window's first key
    std::vector<float> q, k, v;
    std::vector<uint8_t> valid;  // empty: pass null

    const uint8_t* mask() const { return valid.empty() ? nullptr : valid.data(); }
};

Problem make_problem(Rng& rng, int64_t head_dim, int64_t kv_len, Mask mask, float v_mean) {
    Problem p;
    p.head_dim = head_dim;
    p.kv_len = kv_len;
    p.stride = static_cast<size_t>(3 * head_dim + 5);
    p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    p.q.resize(static_cast<size_t>(head_dim));
    for (float& f : p.q) f = rng.normal();
    if (mask != Mask::none) {
        p.valid.resize(static_cast<size_t>(kv_len));
        for (int64_t j = 0; j < kv_len; ++j) {
            const bool on = mask == Mask::random ? rng.uniform() < 0.7 : mask == Mask::only_last && j == kv_len - 1;
            p.valid[static_cast<size_t>(j)] = on ? 1 : 0;
        }
    }
    // Masked rows hold NaN: the kernels must never read them.
    p.k.assign(p.stride * static_cast<size_t>(kv_len), std::nanf(""));
    p.v.assign(p.k.size(), std::nanf(""));
    for (int64_t j = 0; j < kv_len; ++j) {
        if (!p.valid.empty() && !p.valid[static_cast<size_t>(j)]) continue;
        for (int64_t d = 0; d < head_dim; ++d) {
            p.k[static_cast<size_t>(j) * p.stride + static_cast<size_t>(d)] = rng.normal();
            p.v[static_cast<size_t>(j) * p.stride + static_cast<size_t>(d)] = v_mean + rng.normal();
        }
    }
    return p;
}

// Runs one kernel; checks that it wrote exactly head_dim outputs and used only
// the scratch attend_block_scratch(kv_len) promises.
using AttendFn = void (*)(const float*, const float*, size_t, const float*, size_t, int64_t, int64_t, float,
                          const uint8_t*, float*, float*, float, int64_t) noexcept;
std::vector<float> run(AttendFn fn, const Problem& p, const std::vector<float>& values) {
    std::vector<float> out(static_cast<size_t>(p.head_dim) + 4, kSentinel);
    const size_t scratch_floats = k::attend_block_scratch(p.kv_len);
    std::vector<float> scratch(scratch_floats + 8, kSentinel);
    fn(p.q.data(), p.k.data(), p.stride, values.data(), p.stride, p.kv_len, p.head_dim, p.scale, p.mask(), out.data(),
       scratch.data(), p.softcap, p.kv_start);
    for (size_t i = static_cast<size_t>(p.head_dim); i < out.size(); ++i) REQUIRE(out[i] == kSentinel);
    for (size_t i = scratch_floats; i < scratch.size(); ++i) REQUIRE(scratch[i] == kSentinel);
    out.resize(static_cast<size_t>(p.head_dim));
    return out;
}

// ---------------------------------------------------------------- fixture

const kiln::GgufFile& ops_fixture() {
    static const kiln::GgufFile file =
        kiln::GgufFile::open(kiln::test::fixtures_dir() / "ops" / "ops_reference.gguf");
    return file;
}

template <class T>
std::vector<T> fixture_tensor(const std::string& name, kiln::DType type, std::vector<uint64_t> dims) {
    const kiln::GgufTensor& t = ops_fixture().get_tensor(name);
    INFO("fixture tensor " << name);
    REQUIRE(t.type == type);
    REQUIRE(t.dims == dims);
    std::vector<T> v(t.elements);
    REQUIRE(t.data.size() == v.size() * sizeof(T));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
}

}  // namespace

TEST_CASE("attention: fast matches the double-precision reference on odd shapes and masks",
          "[kernels][attention]") {
    Rng rng(42);
    Worst worst{"attend fast vs ref"};
    for (int64_t head_dim : {1, 3, 8, 16, 64, 65, 128}) {
        for (int64_t kv_len : {1, 2, 17, 100, 2048}) {
            for (Mask mask : {Mask::none, Mask::random, Mask::all_masked, Mask::only_last}) {
                for (float v_mean : {0.0f, 1.0f}) {  // 1: values of one sign, the hard case for the value sum
                    INFO("head_dim=" << head_dim << " kv_len=" << kv_len << " mask=" << mask_name(mask)
                                     << " v_mean=" << v_mean);
                    const Problem p = make_problem(rng, head_dim, kv_len, mask, v_mean);
                    const std::vector<float> fast = run(k::attend, p, p.v);
                    const std::vector<float> ref = run(k::ref::attend, p, p.v);
                    if (mask == Mask::all_masked) {  // zeros, not NaN
                        for (int64_t d = 0; d < head_dim; ++d) REQUIRE((fast[d] == 0.0f && ref[d] == 0.0f));
                        continue;
                    }
                    if (mask == Mask::only_last) {  // one key has weight exactly 1: out is its value row
                        const float* v_last = p.v.data() + static_cast<size_t>(kv_len - 1) * p.stride;
                        for (int64_t d = 0; d < head_dim; ++d) REQUIRE((fast[d] == v_last[d] && ref[d] == v_last[d]));
                        continue;
                    }
                    std::vector<float> abs_v(p.v.size());
                    for (size_t i = 0; i < p.v.size(); ++i) abs_v[i] = std::fabs(p.v[i]);
                    const std::vector<float> magnitude = run(k::ref::attend, p, abs_v);  // Σ p_j |v_j[d]|
                    for (int64_t d = 0; d < head_dim; ++d) worst.add(d, fast[d], ref[d], 1e-6 * magnitude[d]);
                    REQUIRE_WITHIN(worst);
                }
            }
        }
    }
}

TEST_CASE("attention: soft-capped scores and sliding windows, fast against the reference", "[kernels][attention]") {
    Rng rng(43);
    Worst worst{"attend softcap/window fast vs ref"};
    for (int64_t head_dim : {3, 16, 65, 128}) {
        for (int64_t kv_len : {1, 17, 100, 700}) {
            for (Mask mask : {Mask::none, Mask::random}) {
                for (const float softcap : {0.0f, 0.7f, 50.0f}) {
                    for (const int64_t window : {int64_t{0}, int64_t{1}, int64_t{13}}) {
                        INFO("head_dim=" << head_dim << " kv_len=" << kv_len << " mask=" << mask_name(mask)
                                         << " softcap=" << softcap << " window=" << window);
                        Problem p = make_problem(rng, head_dim, kv_len, mask, 0.5f);
                        p.scale *= 4.0f;  // scores of several units, where the cap bends them
                        p.softcap = softcap;
                        p.kv_start = window > 0 ? std::max<int64_t>(0, kv_len - window) : 0;
                        const std::vector<float> fast = run(k::attend, p, p.v);
                        const std::vector<float> ref = run(k::ref::attend, p, p.v);
                        std::vector<float> abs_v(p.v.size());
                        for (size_t i = 0; i < p.v.size(); ++i) abs_v[i] = std::fabs(p.v[i]);
                        const std::vector<float> magnitude = run(k::ref::attend, p, abs_v);
                        // A float tanh and the float cap add a few ulps to each score: 4e-6 of the
                        // weighted magnitude (the scores stay under 50 in size).
                        for (int64_t d = 0; d < head_dim; ++d) worst.add(d, fast[d], ref[d], 4e-6 * magnitude[d] + 1e-30);
                        REQUIRE_WITHIN(worst);
                    }
                }
            }
        }
    }
}

TEST_CASE("attention: the cap and the window do what their definitions say", "[kernels][attention]") {
    Rng rng(44);
    const int64_t head_dim = 8, kv_len = 9;
    Problem p = make_problem(rng, head_dim, kv_len, Mask::none, 0.0f);
    p.scale = 3.0f;
    // A window starting at key 4 is the mask that drops keys 0..3, bit for bit, in both kernels.
    Problem masked = p;
    masked.valid.assign(static_cast<size_t>(kv_len), 1);
    std::fill(masked.valid.begin(), masked.valid.begin() + 4, uint8_t{0});
    Problem windowed = p;
    windowed.kv_start = 4;
    for (AttendFn fn : {AttendFn{k::attend}, AttendFn{k::ref::attend}}) CHECK(run(fn, windowed, p.v) == run(fn, masked, p.v));
    // The capped reference is the softmax of cap·tanh(scale·q·k / cap), computed here in double.
    Problem capped = p;
    capped.softcap = 1.5f;
    std::vector<double> w(static_cast<size_t>(kv_len));
    double sum = 0;
    for (int64_t j = 0; j < kv_len; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < head_dim; ++d) dot += double(p.q[d]) * p.k[static_cast<size_t>(j) * p.stride + d];
        w[j] = std::exp(1.5 * std::tanh(3.0 * dot / 1.5));
        sum += w[j];
    }
    const std::vector<float> got = run(k::ref::attend, capped, p.v);
    for (int64_t d = 0; d < head_dim; ++d) {
        double want = 0;
        for (int64_t j = 0; j < kv_len; ++j) want += w[j] / sum * p.v[static_cast<size_t>(j) * p.stride + d];
        CHECK(std::fabs(got[d] - want) <= 1e-6 * (std::fabs(want) + 1));
    }
}

TEST_CASE("attention: scale is applied to the scores before the softmax", "[kernels][attention]") {
    // Scores (1, 0) * ln 3 give weights (3/4, 1/4): out = 3/4 (4, 0) + 1/4 (0, 8) = (3, 2).
    const float q[2] = {1.0f, 0.0f};
    const float keys[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    const float values[4] = {4.0f, 0.0f, 0.0f, 8.0f};
    const float scale = static_cast<float>(std::log(3.0));
    for (AttendFn fn : {AttendFn{k::attend}, AttendFn{k::ref::attend}}) {
        float out[2];
        std::vector<float> scratch_v(k::attend_block_scratch(2));
        float* scratch = scratch_v.data();
        fn(q, keys, 2, values, 2, 2, 2, scale, nullptr, out, scratch, 0.0f, 0);
        CHECK(out[0] == Approx(3.0).epsilon(1e-6));
        CHECK(out[1] == Approx(2.0).epsilon(1e-6));
        const uint8_t first_only[2] = {1, 0};
        fn(q, keys, 2, values, 2, 2, 2, scale, first_only, out, scratch, 0.0f, 0);
        CHECK(out[0] == 4.0f);
        CHECK(out[1] == 0.0f);
    }
}

TEST_CASE("attention: large scores stay finite", "[kernels][attention]") {
    // Scores of +-1e4 (and a 1e30-sized scale): max-subtraction keeps exp <= 1.
    const float q[2] = {100.0f, 0.0f};
    const float keys[6] = {100.0f, 0.0f, -100.0f, 0.0f, 99.99f, 0.0f};
    const float values[6] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    for (AttendFn fn : {AttendFn{k::attend}, AttendFn{k::ref::attend}}) {
        for (float scale : {1.0f, 1e30f}) {
            float out[2];
            std::vector<float> scratch(k::attend_block_scratch(3));
            fn(q, keys, 2, values, 2, 3, 2, scale, nullptr, out, scratch.data(), 0.0f, 0);
            REQUIRE(std::isfinite(out[0]));
            REQUIRE(std::isfinite(out[1]));
            if (scale == 1e30f) {  // the top key takes all the weight
                CHECK(out[0] == 1.0f);
                CHECK(out[1] == 2.0f);
            }
        }
    }
}

TEST_CASE("attention fixture: grouped-query causal attention with padding matches PyTorch",
          "[kernels][attention][fixture]") {
    const struct {
        const char* name;
        uint64_t n_head, n_kv_head, head_dim, kv_len, n_q;
    } cases[] = {{"attn_gqa4", 8, 4, 64, 11, 11}, {"attn_gqa2", 8, 2, 12, 9, 5}};
    for (const auto& c : cases) {
        const std::string name = c.name;
        using kiln::DType;
        const auto q = fixture_tensor<float>(name + ".q", DType::F32, {c.head_dim, c.n_head, c.n_q});
        const auto keys = fixture_tensor<float>(name + ".k", DType::F32, {c.head_dim, c.n_kv_head, c.kv_len});
        const auto values = fixture_tensor<float>(name + ".v", DType::F32, {c.head_dim, c.n_kv_head, c.kv_len});
        const auto pos = fixture_tensor<int32_t>(name + ".pos", DType::I32, {c.n_q});
        const auto mask32 = fixture_tensor<int32_t>(name + ".mask", DType::I32, {c.kv_len});
        const auto want = fixture_tensor<float>(name + ".out", DType::F32, {c.head_dim, c.n_head, c.n_q});
        const float scale = static_cast<float>(ops_fixture().get_number("kiln.fixture." + name + ".scale"));
        std::vector<uint8_t> mask(mask32.begin(), mask32.end());

        const size_t row = c.n_kv_head * c.head_dim;  // one position's keys, all kv heads
        const uint64_t group = c.n_head / c.n_kv_head;
        Worst wf{name + " fast vs torch"}, wr{name + " ref vs torch"};
        std::vector<float> fast(c.head_dim), ref(c.head_dim), scratch(k::attend_block_scratch(c.kv_len));
        for (uint64_t t = 0; t < c.n_q; ++t) {
            const int64_t kv_len = pos[t] + 1;  // causal: a query sees keys 0..pos
            for (uint64_t h = 0; h < c.n_head; ++h) {
                const float* qh = q.data() + (t * c.n_head + h) * c.head_dim;
                const size_t kv_off = (h / group) * c.head_dim;  // query head h reads kv head h / group
                const auto hd = static_cast<int64_t>(c.head_dim);
                k::attend(qh, keys.data() + kv_off, row, values.data() + kv_off, row, kv_len, hd, scale, mask.data(),
                          fast.data(), scratch.data());
                k::ref::attend(qh, keys.data() + kv_off, row, values.data() + kv_off, row, kv_len, hd, scale,
                               mask.data(), ref.data(), scratch.data());
                for (uint64_t d = 0; d < c.head_dim; ++d) {
                    const size_t i = (t * c.n_head + h) * c.head_dim + d;
                    const double allowed = 1e-5 * std::max(1.0, std::fabs(static_cast<double>(want[i])));
                    wf.add(static_cast<int64_t>(i), fast[d], want[i], allowed);
                    wr.add(static_cast<int64_t>(i), ref[d], want[i], allowed);
                }
            }
        }
        REQUIRE_WITHIN(wf);
        REQUIRE_WITHIN(wr);
    }
}

// attend_block: queries of one key/value head with their own lengths and
// masks. Each result must be the bits attend() gives that query alone (so a
// query's output does not depend on how a graph groups it) and within the
// tolerance above of the double reference, with its mask or, where the mask
// keeps every key, without one. Rows that no query of the block uses hold
// NaN; rows some query uses are finite.
TEST_CASE("attention blocks: each query equals attend alone bit for bit, and the reference",
          "[kernels][attention]") {
    Rng rng(7);
    Worst worst{"attend_block vs ref"};
    for (int64_t head_dim : {1, 5, 16, 33, 64, 80, 130}) {
        for (int nq = 1; nq <= k::kMaxBlockQueries; ++nq) {
            for (int trial = 0; trial < 6; ++trial) {
                INFO("head_dim=" << head_dim << " queries=" << nq << " trial=" << trial);
                const int64_t n_ctx = 70;
                const size_t stride = static_cast<size_t>(head_dim + 3);
                std::vector<int64_t> len(static_cast<size_t>(nq));
                std::vector<std::vector<uint8_t>> masks(static_cast<size_t>(nq));
                std::vector<bool> used(static_cast<size_t>(n_ctx), false);
                for (int i = 0; i < nq; ++i) {
                    // trial 0: a causal prompt's consecutive tokens; others random, some fully masked.
                    len[i] = trial == 0 ? 20 + i : static_cast<int64_t>(rng.uniform() * n_ctx);
                    masks[i].assign(static_cast<size_t>(n_ctx), 1);
                    if (trial >= 2)
                        for (auto& m : masks[i]) m = rng.uniform() < (trial == 5 ? 0.0 : 0.6) ? 1 : 0;
                    for (int64_t j = 0; j < len[i]; ++j) used[j] = used[j] || masks[i][j] != 0;
                }
                std::vector<float> keys(stride * n_ctx, std::nanf("")), values(keys.size(), std::nanf(""));
                for (int64_t j = 0; j < n_ctx; ++j)
                    for (int64_t d = 0; d < head_dim && used[j]; ++d) {
                        keys[j * stride + d] = rng.normal();
                        values[j * stride + d] = 0.5f + rng.normal();
                    }
                std::vector<std::vector<float>> queries(static_cast<size_t>(nq)), block_out(queries.size());
                std::vector<k::AttentionQuery> block;
                for (int i = 0; i < nq; ++i) {
                    queries[i].resize(static_cast<size_t>(head_dim));
                    for (float& f : queries[i]) f = rng.normal();
                    block_out[i].assign(static_cast<size_t>(head_dim) + 1, kSentinel);
                    block.push_back({queries[i].data(), len[i], masks[i].data(), block_out[i].data()});
                }
                const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
                std::vector<float> scratch(k::attend_block_scratch(n_ctx));
                k::attend_block(block.data(), nq, keys.data(), stride, values.data(), stride, head_dim, scale,
                                scratch.data());
                // The same block with no mask where a query's mask keeps every key it
                // reaches: unmasked tiles take the kernel's branch-free epilogues, which
                // must give the bits of the masked path.
                std::vector<std::vector<float>> unmasked_out(queries.size());
                std::vector<k::AttentionQuery> unmasked = block;
                for (int i = 0; i < nq; ++i) {
                    bool keeps_all = true;
                    for (int64_t j = 0; j < len[i]; ++j) keeps_all = keeps_all && masks[i][j] != 0;
                    unmasked_out[i].assign(static_cast<size_t>(head_dim), kSentinel);
                    unmasked[i].out = unmasked_out[i].data();
                    if (keeps_all) unmasked[i].kv_valid = nullptr;
                }
                k::attend_block(unmasked.data(), nq, keys.data(), stride, values.data(), stride, head_dim, scale,
                                scratch.data());
                std::vector<float> abs_v(values.size());
                for (size_t i = 0; i < values.size(); ++i) abs_v[i] = std::fabs(values[i]);
                for (int i = 0; i < nq; ++i) {
                    REQUIRE(std::memcmp(unmasked_out[i].data(), block_out[i].data(),
                                        unmasked_out[i].size() * sizeof(float)) == 0);
                    REQUIRE(block_out[i][static_cast<size_t>(head_dim)] == kSentinel);  // wrote head_dim outputs
                    std::vector<float> alone(static_cast<size_t>(head_dim)), ref(alone.size()), magnitude(alone.size());
                    k::attend(queries[i].data(), keys.data(), stride, values.data(), stride, len[i], head_dim, scale,
                              masks[i].data(), alone.data(), scratch.data());
                    k::ref::attend(queries[i].data(), keys.data(), stride, values.data(), stride, len[i], head_dim,
                                   scale, masks[i].data(), ref.data(), scratch.data());
                    k::ref::attend(queries[i].data(), keys.data(), stride, abs_v.data(), stride, len[i], head_dim,
                                   scale, masks[i].data(), magnitude.data(), scratch.data());
                    REQUIRE(std::memcmp(alone.data(), block_out[i].data(), alone.size() * sizeof(float)) == 0);
                    for (int64_t d = 0; d < head_dim; ++d) {
                        REQUIRE(std::isfinite(block_out[i][d]));
                        worst.add(d, block_out[i][d], ref[d], 1e-6 * magnitude[d]);
                    }
                    REQUIRE_WITHIN(worst);
                }
            }
        }
    }
}
