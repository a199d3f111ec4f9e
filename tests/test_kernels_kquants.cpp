// K-quant (Q2_K..Q6_K) x Q8_K dot products (engine/kernels/dot_kquants_ref.h)
// and every kernel set's matmul with those weights.
//
//  * The unpacker against gguf-py: blocks.<type> of tests/fixtures/quant_types.gguf
//    dequantized as d * scale * code - dmin * min must equal dequant.<type>
//    (gguf-py's numpy dequantize) within a few float roundings of each term.
//  * The scalar dot against a double-precision dot of dequantized weights
//    (type_traits(type).to_float) and dequantized Q8_K activations (q8_k_to_float), on llama-quantize's bytes
//    (quantized.<type>) and on seeded random blocks. The scalar dot sums exact
//    int32 per super-block and rounds once per term and per super-block, the
//    dequantized weights carry up to 2 roundings each: the tolerance is
//    (super-blocks + 8) x 4 float epsilons of M = Σ (|d·sc·q| + |dmin·m|)·|x|.
//  * Every set's matmul against the scalar set: the integer sums are exact in
//    every set, but a SIMD set may convert partial sums (vector lanes) to float
//    before adding them, so the tolerance is (super-blocks + 32) x 2 epsilons of
//    a bound on every such partial sum (lane_magnitude).
//  * Rows claimed by three threads give the bits of one call.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/kernels/dot_kquants_ref.h"
#include "engine/kernels/matmul.h"
#include "engine/quant/blocks.h"
#include "engine/quant/interleave.h"
#include "engine/quant/reference.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

using kiln::DType;
using namespace kiln::kernels;

namespace {

constexpr DType kKTypes[] = {DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K};
constexpr int64_t kQ8KBytes = sizeof(kiln::quant::BlockQ8_K);

std::string type_name(DType t) { return std::string(kiln::type_traits(t).name); }
int64_t block_bytes(DType t) { return static_cast<int64_t>(kiln::type_traits(t).block_bytes); }

const kiln::GgufFile& fixture() {
    static const kiln::GgufFile file = kiln::GgufFile::open(kiln::test::fixtures_dir() / "quant_types.gguf");
    return file;
}

// Dequantized elements of one weight row from the unpacker, in float as
// gguf-py computes them ((d * sc) * q - (dmin * m)), and each one's magnitude
// |d·sc·q| + |dmin·m| for the tolerances.
void dequantize_row(DType type, int64_t k, const std::byte* w, std::vector<double>& values,
                    std::vector<double>& magnitudes) {
    values.assign(static_cast<size_t>(k), 0.0);
    magnitudes.assign(static_cast<size_t>(k), 0.0);
    for (int64_t i = 0; i < k / 256; ++i) {
        UnpackedSuperBlock u;
        unpack_kquant_block(type, w + i * block_bytes(type), u);
        for (int e = 0; e < 256; ++e) {
            const double a = static_cast<double>(u.d) * u.scales[e / 16] * u.codes[e];
            const double b = static_cast<double>(u.dmin) * u.mins[e / 16];
            values[static_cast<size_t>(i * 256 + e)] = a - b;
            magnitudes[static_cast<size_t>(i * 256 + e)] = std::fabs(a) + std::fabs(b);
        }
    }
}

// A bound on every partial sum a kernel may form inside a super-block (any
// grouping of elements into lanes): Σ_e (|dall·sc|·(|u_e| + off) + |dmin·m|)·|x_e|
// with u_e the code as stored unsigned (Q3_K: +4, Q6_K: +32, the offset `off`
// the kernels take back through the bsums).
double lane_magnitude(DType type, int64_t k, const std::byte* w, const std::byte* x) {
    const int off = type == DType::Q3_K ? 4 : type == DType::Q6_K ? 32 : 0;
    double m = 0.0;
    for (int64_t i = 0; i < k / 256; ++i) {
        UnpackedSuperBlock u;
        unpack_kquant_block(type, w + i * block_bytes(type), u);
        kiln::quant::BlockQ8_K xb;
        std::memcpy(&xb, x + i * kQ8KBytes, sizeof(xb));
        for (int e = 0; e < 256; ++e) {
            const double dall = std::fabs(static_cast<double>(xb.d) * u.d * u.scales[e / 16]);
            const double dmin = std::fabs(static_cast<double>(xb.d) * u.dmin * u.mins[e / 16]);
            m += (dall * (std::abs(u.codes[e] + off) + off) + dmin) * std::abs(xb.qs[e]);
        }
    }
    return m;
}

float scalar_dot(DType type, int64_t k, const std::byte* w, const std::byte* x) {
    switch (type) {
        case DType::Q2_K: return dot_q2_k_q8_k_ref(k, w, x);
        case DType::Q3_K: return dot_q3_k_q8_k_ref(k, w, x);
        case DType::Q4_K: return dot_q4_k_q8_k_ref(k, w, x);
        case DType::Q5_K: return dot_q5_k_q8_k_ref(k, w, x);
        default: return dot_q6_k_q8_k_ref(k, w, x);
    }
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = normal(rng);
    return v;
}

std::vector<std::byte> quantize_q8_k(const std::vector<float>& x) {
    std::vector<std::byte> out(static_cast<size_t>(static_cast<int64_t>(x.size()) / 256 * kQ8KBytes));
    kiln::quant::q8_k_from_float_ref(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

// Random block bytes with finite, moderate fp16 super-scales.
std::vector<std::byte> random_blocks(DType type, int64_t blocks, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> b(static_cast<size_t>(blocks * block_bytes(type)));
    for (std::byte& v : b) v = static_cast<std::byte>(rng() & 0xFF);
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    const int64_t bb = block_bytes(type);
    std::vector<int64_t> halves;
    switch (type) {
        case DType::Q2_K: halves = {80, 82}; break;
        case DType::Q3_K: halves = {108}; break;
        case DType::Q6_K: halves = {208}; break;
        default: halves = {0, 2}; break;
    }
    for (int64_t i = 0; i < blocks; ++i)
        for (int64_t off : halves) {
            const uint16_t h = kiln::fp32_to_fp16(scale(rng));
            std::memcpy(b.data() + i * bb + off, &h, 2);
        }
    return b;
}

void check_dot_against_dequantized(DType type, int64_t k, const std::byte* w, const std::byte* x) {
    // The weights as the traits table's dequantizer (kquant-ref, bit-exact with
    // ggml) gives them; the unpacker only supplies the magnitudes of the bound.
    std::vector<double> unpacked, wm;
    dequantize_row(type, k, w, unpacked, wm);
    std::vector<float> wf(static_cast<size_t>(k));
    kiln::type_traits(type).to_float(w, wf.data(), k);
    const std::vector<double> wv(wf.begin(), wf.end());
    std::vector<float> xf(static_cast<size_t>(k));
    kiln::quant::q8_k_to_float(x, xf.data(), k);
    double exact = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < k; ++i) {
        exact += wv[static_cast<size_t>(i)] * xf[static_cast<size_t>(i)];
        magnitude += wm[static_cast<size_t>(i)] * std::fabs(xf[static_cast<size_t>(i)]);
    }
    const double tol = static_cast<double>(k / 256 + 8) * 4.0 * FLT_EPSILON * magnitude;
    const float got = scalar_dot(type, k, w, x);
    INFO(type_name(type) << " k=" << k << " got " << got << " exact " << exact << " tol " << tol);
    REQUIRE(std::fabs(static_cast<double>(got) - exact) <= tol);
}

}  // namespace

TEST_CASE("kquants: the unpacker dequantizes gguf-py's random blocks", "[kquant_kernels]") {
    for (DType type : kKTypes) {
        const kiln::GgufTensor& blocks = fixture().get_tensor("blocks." + type_name(type));
        const kiln::GgufTensor& dequant = fixture().get_tensor("dequant." + type_name(type));
        REQUIRE(blocks.type == type);
        REQUIRE(dequant.type == DType::F32);
        REQUIRE(blocks.elements == dequant.elements);
        const auto k = static_cast<int64_t>(blocks.elements);
        std::vector<float> expected(static_cast<size_t>(k));
        std::memcpy(expected.data(), dequant.data.data(), expected.size() * 4);
        std::vector<double> values, magnitudes;
        dequantize_row(type, k, blocks.data.data(), values, magnitudes);
        for (int64_t i = 0; i < k; ++i) {
            INFO(type_name(type) << " element " << i);
            // gguf-py rounds d * sc, the product with q, dmin * m and the difference: 4 roundings.
            REQUIRE(std::fabs(values[static_cast<size_t>(i)] - expected[static_cast<size_t>(i)]) <=
                    4.0 * FLT_EPSILON * magnitudes[static_cast<size_t>(i)] + 0.0);
        }
    }
}

TEST_CASE("kquants: the scalar dot equals a double dot of dequantized operands", "[kquant_kernels]") {
    uint32_t seed = 7100;
    for (DType type : kKTypes) {
        // llama-quantize's bytes of the designed rows (512 wide: 2 super-blocks per row).
        const kiln::GgufTensor& q = fixture().get_tensor("quantized." + type_name(type));
        REQUIRE(q.type == type);
        REQUIRE(q.dims.size() == 2);
        const auto k = static_cast<int64_t>(q.dims[0]);
        const auto rows = static_cast<int64_t>(q.dims[1]);
        const int64_t row_bytes = k / 256 * block_bytes(type);
        for (int64_t r = 0; r < rows; ++r) {
            const auto x = quantize_q8_k(random_floats(k, seed++, r % 3 == 0 ? 1.0f : 0.05f));
            INFO("quantized row " << r);
            check_dot_against_dequantized(type, k, q.data.data() + r * row_bytes, x.data());
        }
        // Random blocks (every code and scale bit pattern), several widths.
        for (int64_t k2 : {256, 512, 2816}) {
            const auto w = random_blocks(type, k2 / 256, seed++);
            const auto x = quantize_q8_k(random_floats(k2, seed++, 3.0f));
            check_dot_against_dequantized(type, k2, w.data(), x.data());
        }
    }
}

namespace {

struct Problem {
    DType type;
    int64_t k, rows, n_tokens;
    size_t w_stride, x_stride;
    std::vector<std::byte> w, x;
};

Problem make_problem(DType type, int64_t k, int64_t rows, int64_t n_tokens, uint32_t seed) {
    Problem p{type, k, rows, n_tokens, 0, 0, {}, {}};
    p.w_stride = static_cast<size_t>(k / 256 * block_bytes(type));
    p.w = random_blocks(type, rows * (k / 256), seed);
    p.x_stride = prepared_row_bytes(type, k);
    p.x.resize(p.x_stride * static_cast<size_t>(n_tokens));
    const auto xf = random_floats(k * n_tokens, seed + 1, 2.0f);
    for (int64_t t = 0; t < n_tokens; ++t)
        scalar_matmul_kernels().prepare_row(type, xf.data() + t * k, k, p.x.data() + t * static_cast<int64_t>(p.x_stride));
    return p;
}

std::vector<float> run(const MatmulKernels& set, const Problem& p) {
    std::vector<float> out(static_cast<size_t>(p.rows * p.n_tokens), -1.0f);
    set.matmul(p.type, p.k, p.w.data(), p.w_stride, 0, p.rows, p.x.data(), p.x_stride, p.n_tokens, out.data(),
               p.rows, nullptr);
    return out;
}

}  // namespace

TEST_CASE("kquants: every kernel set matches the scalar set", "[kquant_kernels]") {
    uint32_t seed = 8200;
    for (DType type : kKTypes) {
        REQUIRE(matmul_supports(type));
        REQUIRE(vec_dot_type(type) == DType::Q8_K);
        for (int64_t k : {256, 512, 2816}) {
            for (int64_t n_tokens : {1, 2, 3, 5, 8, 17, 33, 40}) {
                const Problem p = make_problem(type, k, 37, n_tokens, seed++);
                const std::vector<float> expected = run(scalar_matmul_kernels(), p);
                for (const MatmulKernels* set : available_matmul_kernels()) {
                    const std::vector<float> got = run(*set, p);
                    for (int64_t t = 0; t < n_tokens; ++t)
                        for (int64_t r = 0; r < p.rows; ++r) {
                            const double m = lane_magnitude(
                                type, k, p.w.data() + r * static_cast<int64_t>(p.w_stride),
                                p.x.data() + t * static_cast<int64_t>(p.x_stride));
                            const double tol = static_cast<double>(k / 256 + 32) * 2.0 * FLT_EPSILON * m;
                            const size_t i = static_cast<size_t>(t * p.rows + r);
                            INFO(set->name << " " << type_name(type) << " k=" << k << " tokens=" << n_tokens
                                           << " row " << r << " token " << t);
                            REQUIRE(std::fabs(static_cast<double>(got[i]) - expected[i]) <= tol);
                        }
                }
            }
        }
    }
}

TEST_CASE("kquants: rows claimed by several threads equal one call bit for bit", "[kquant_kernels][threads]") {
    uint32_t seed = 9300;
    for (const MatmulKernels* set : available_matmul_kernels()) {
        for (DType type : kKTypes) {
            for (int64_t n_tokens : {1, 3, 17, 40}) {
                const Problem p = make_problem(type, 512, 203, n_tokens, seed++);
                const std::vector<float> whole = run(*set, p);
                std::vector<float> claimed(whole.size(), -1.0f);
                constexpr int kThreads = 3;
                std::atomic<int64_t> next{kThreads};
                std::vector<std::thread> threads;
                for (int ith = 0; ith < kThreads; ++ith)
                    threads.emplace_back([&, ith] {
                        const RowClaims claims{&next, 32, ith};
                        set->matmul(p.type, p.k, p.w.data(), p.w_stride, 0, p.rows, p.x.data(), p.x_stride,
                                    p.n_tokens, claimed.data(), p.rows, &claims);
                    });
                for (std::thread& t : threads) t.join();
                INFO(set->name << " " << type_name(type) << " tokens=" << n_tokens);
                REQUIRE(std::memcmp(whole.data(), claimed.data(), whole.size() * sizeof(float)) == 0);
            }
        }
    }
}

// Interleaved weights (quant/interleave.h): the layout round-trips; the scalar
// set computes them with the plain reference's bits; every set matches the
// scalar set within the plain kernels' tolerance, with the bits of one call
// when three threads claim rows.
namespace {

Problem interleaved(const Problem& plain, DType layout) {
    Problem p = plain;
    p.type = layout;
    kiln::quant::interleave_rows(layout, plain.w.data(), plain.rows, plain.k, p.w.data());
    return p;
}

}  // namespace

constexpr DType kLayouts[] = {DType::Q4_K_R16, DType::Q5_K_R16, DType::Q6_K_R16, DType::Q6_K_R16B};

TEST_CASE("interleaved: rows round-trip to the plain blocks", "[kquant_kernels]") {
    for (DType layout : kLayouts) {
        const DType type = kiln::quant::plain_type(layout);
        const Problem plain = make_problem(type, 768, 32, 1, 7100);
        const Problem p = interleaved(plain, layout);
        REQUIRE(p.w != plain.w);  // rearranged, not copied
        const int64_t bb = block_bytes(type);
        std::byte block[256];
        for (int64_t r = 0; r < plain.rows; ++r)
            for (int64_t i = 0; i < 3; ++i) {
                const std::byte* group = p.w.data() + (r - r % 16) * static_cast<int64_t>(p.w_stride);
                kiln::quant::deinterleaved_block(p.type, group, p.k, static_cast<int>(r % 16), i, block);
                INFO(type_name(layout) << " row " << r << " block " << i);
                REQUIRE(std::memcmp(block, plain.w.data() + r * static_cast<int64_t>(plain.w_stride) + i * bb,
                                    static_cast<size_t>(bb)) == 0);
            }
    }
}

TEST_CASE("interleaved: every kernel set matches the plain scalar set", "[kquant_kernels]") {
    uint32_t seed = 7200;
    for (DType layout : kLayouts)
    for (int64_t k : {256, 512, 2816}) {
        const DType type = kiln::quant::plain_type(layout);
        for (int64_t n_tokens : {1, 2, 3, 5, 8, 17, 33}) {
            const Problem plain = make_problem(type, k, 48, n_tokens, seed++);
            const Problem p = interleaved(plain, layout);
            const std::vector<float> expected = run(scalar_matmul_kernels(), plain);
            // The scalar set: the plain reference's bits.
            const std::vector<float> scalar = run(scalar_matmul_kernels(), p);
            INFO(type_name(layout) << " k=" << k << " tokens=" << n_tokens);
            REQUIRE(std::memcmp(scalar.data(), expected.data(), expected.size() * sizeof(float)) == 0);
            for (const MatmulKernels* set : available_matmul_kernels()) {
                const std::vector<float> got = run(*set, p);
                for (int64_t t = 0; t < n_tokens; ++t)
                    for (int64_t r = 0; r < p.rows; ++r) {
                        const double m = lane_magnitude(type, k,
                                                        plain.w.data() + r * static_cast<int64_t>(plain.w_stride),
                                                        plain.x.data() + t * static_cast<int64_t>(plain.x_stride));
                        const double tol = static_cast<double>(k / 256 + 32) * 2.0 * FLT_EPSILON * m;
                        const size_t i = static_cast<size_t>(t * p.rows + r);
                        INFO(set->name << " row " << r << " token " << t);
                        REQUIRE(std::fabs(static_cast<double>(got[i]) - expected[i]) <= tol);
                    }
            }
        }
    }
}

// Q6_K_R16B holds Q6_K_R16's codes in other bits of the same bytes: the same
// integer sums and float operations, so every set gives both layouts' products
// the same bits (decode, two-token and GEMM sizes).
TEST_CASE("interleaved: Q6_K_R16B gives Q6_K_R16's bits in every kernel set", "[kquant_kernels]") {
    uint32_t seed = 7400;
    for (int64_t n_tokens : {1, 2, 3, 8, 17}) {
        const Problem plain = make_problem(DType::Q6_K, 768, 32, n_tokens, seed++);
        const Problem r16 = interleaved(plain, DType::Q6_K_R16), r16b = interleaved(plain, DType::Q6_K_R16B);
        REQUIRE(r16.w != r16b.w);
        for (const MatmulKernels* set : available_matmul_kernels()) {
            const std::vector<float> a = run(*set, r16), b = run(*set, r16b);
            INFO(set->name << " tokens=" << n_tokens);
            REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("interleaved: rows claimed by several threads equal one call bit for bit", "[kquant_kernels][threads]") {
    uint32_t seed = 7300;
    for (const MatmulKernels* set : available_matmul_kernels()) {
        for (DType layout : kLayouts)
        for (int64_t n_tokens : {1, 3, 17}) {
            const Problem p = interleaved(make_problem(kiln::quant::plain_type(layout), 512, 208, n_tokens, seed++), layout);
            const std::vector<float> whole = run(*set, p);
            std::vector<float> claimed(whole.size(), -1.0f);
            constexpr int kThreads = 3;
            std::atomic<int64_t> next{kThreads};
            std::vector<std::thread> threads;
            const int64_t chunk = matmul_row_tile(p.type, n_tokens);
            for (int ith = 0; ith < kThreads; ++ith)
                threads.emplace_back([&, ith] {
                    const RowClaims claims{&next, chunk, ith};
                    set->matmul(p.type, p.k, p.w.data(), p.w_stride, 0, p.rows, p.x.data(), p.x_stride, p.n_tokens,
                                claimed.data(), p.rows, &claims);
                });
            for (std::thread& t : threads) t.join();
            INFO(set->name << " " << type_name(layout) << " tokens=" << n_tokens);
            REQUIRE(std::memcmp(whole.data(), claimed.data(), whole.size() * sizeof(float)) == 0);
        }
    }
}
