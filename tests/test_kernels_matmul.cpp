// Tests of the matmul kernel sets (engine/kernels/matmul.h).
//
//  * The scalar set against an independent path: weights and prepared
//    activations dequantized with the traits table's to_float and multiplied in
//    double. The scalar set rounds each float product (float weights) or sums
//    exact int32 block dots with one float multiply-add per block (quantized),
//    so it lies within a few float ulps of Σ|w·x| of the exact value.
//  * Every available set against the scalar set on odd shapes, sub-ranges of
//    rows and padded strides. Float sets sum in a different order (vector lanes,
//    k chunks), so the tolerance is relative to Σ|w·x|: 1e-5. For Q8_0/Q4_0 the
//    int32 block sums are exact in every set; only the float sum over blocks is
//    ordered differently. The worst case of that is about (blocks + 16) float
//    roundings of Σ|w·x| (1.2e-5 for 4128 columns); in practice the error is a
//    random walk (largest seen: 1.3e-7), and the test allows 1e-6. (Float
//    sets: largest seen 2.3e-7 against the 1e-5 allowed.)
//  * prepare_row of every set against quant::q8_0_from_float_ref (and Q8_K's), byte for byte,
//    on random rows, exact rounding ties and special values.
//  * The matmul sets of the kernel targets (kernel_targets.h).
//  * The NEON sets' Q8_0/Q4_0 bits under any row split and token batch (their
//    promise; the SMMLA GEMM of neon-i8mm pairs odd rows and tokens itself).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/kernels/amx_support.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/kernel_targets.h"
#include "engine/kernels/matmul_impl.h"
#include "engine/quant/interleave.h"
#include "engine/quant/reference.h"

using kiln::DType;
using namespace kiln::kernels;

namespace {

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

bool is_quantized(DType t) { return kiln::type_traits(t).quantized; }

// Rows of random floats; each row gets its own scale so blocks and rows differ
// in magnitude.
std::vector<float> random_matrix(int64_t rows, int64_t k, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const float scales[] = {1.0f, 0.01f, 30.0f, 0.25f, 4.0f};
    std::vector<float> m(static_cast<size_t>(rows * k));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < k; ++i) m[static_cast<size_t>(r * k + i)] = scales[r % 5] * normal(rng);
    return m;
}

struct Operands {
    DType type;
    int64_t rows, k, n_tokens;
    size_t w_stride, x_stride;
    std::vector<std::byte> w;  // rows x w_stride
    std::vector<std::byte> x;  // n_tokens x x_stride, prepared by the scalar set
    std::vector<double> wd;    // the weights as to_float reads them, rows x k
    std::vector<double> xd;    // the prepared activations as to_float reads them, n_tokens x k
};

// Strides carry padding (odd for blocks, so rows are not 2-byte aligned) to
// show that the kernels honour them.
Operands make_operands(DType type, int64_t rows, int64_t k, int64_t n_tokens, uint32_t seed) {
    const auto& traits = kiln::type_traits(type);
    Operands o{type, rows, k, n_tokens, 0, 0, {}, {}, {}, {}};
    const size_t row_bytes = static_cast<size_t>(*kiln::checked_bytes(type, static_cast<uint64_t>(k)));
    o.w_stride = row_bytes + (is_quantized(type) ? 3 : 12);
    o.x_stride = prepared_row_bytes(type, k) + 8;
    o.w.assign(static_cast<size_t>(rows) * o.w_stride, std::byte{0x5A});
    o.x.assign(static_cast<size_t>(n_tokens) * o.x_stride, std::byte{0x5A});

    const std::vector<float> wf = random_matrix(rows, k, seed);
    const std::vector<float> xf = random_matrix(n_tokens, k, seed + 1000);
    std::vector<float> row(static_cast<size_t>(k));
    o.wd.resize(static_cast<size_t>(rows * k));
    for (int64_t r = 0; r < rows; ++r) {
        std::byte* dst = o.w.data() + r * o.w_stride;
        traits.from_float_ref(wf.data() + r * k, dst, k);
        traits.to_float(dst, row.data(), k);
        std::copy(row.begin(), row.end(), o.wd.begin() + r * k);
    }
    const auto& xtraits = kiln::type_traits(vec_dot_type(type));
    o.xd.resize(static_cast<size_t>(n_tokens * k));
    for (int64_t t = 0; t < n_tokens; ++t) {
        std::byte* dst = o.x.data() + t * o.x_stride;
        scalar_matmul_kernels().prepare_row(type, xf.data() + t * k, k, dst);
        xtraits.to_float(dst, row.data(), k);
        std::copy(row.begin(), row.end(), o.xd.begin() + t * k);
    }
    return o;
}

struct Result {
    int64_t out_stride;
    std::vector<float> out;  // n_tokens x out_stride
};

constexpr float kSentinel = 12345.0f;

Result run(const MatmulKernels& set, const Operands& o, int64_t r0, int64_t r1) {
    Result res{o.rows + 5, {}};
    res.out.assign(static_cast<size_t>(o.n_tokens * res.out_stride), kSentinel);
    set.matmul(o.type, o.k, o.w.data(), o.w_stride, r0, r1, o.x.data(), o.x_stride, o.n_tokens, res.out.data(),
               res.out_stride, nullptr);
    return res;
}

// Σ|w·x| per output, in double: the scale that summation errors are relative to.
std::vector<double> magnitudes(const Operands& o) {
    std::vector<double> m(static_cast<size_t>(o.n_tokens * o.rows));
    for (int64_t t = 0; t < o.n_tokens; ++t)
        for (int64_t r = 0; r < o.rows; ++r) {
            double s = 0;
            for (int64_t i = 0; i < o.k; ++i) s += std::fabs(o.wd[r * o.k + i] * o.xd[t * o.k + i]);
            m[t * o.rows + r] = s;
        }
    return m;
}

std::string describe(const MatmulKernels& set, const Operands& o, int64_t r0, int64_t r1) {
    return std::string(set.name) + " " + std::string(kiln::dtype_name(o.type)) + " rows=" + std::to_string(o.rows) +
           " k=" + std::to_string(o.k) + " tokens=" + std::to_string(o.n_tokens) + " range=[" + std::to_string(r0) +
           "," + std::to_string(r1) + ")";
}

// Checks out[t][r] against want(t, r) within rel * Σ|w·x| inside [r0, r1), and
// that nothing outside the range (or in the stride padding) was written.
template <typename Want>
void check_result(const std::string& what, const Operands& o, const Result& got, int64_t r0, int64_t r1,
                  const std::vector<double>& mag, double rel, Want want) {
    int64_t bad = 0, touched = 0;
    double worst = 0;  // largest error in units of Σ|w·x|
    std::string first;
    for (int64_t t = 0; t < o.n_tokens; ++t)
        for (int64_t r = 0; r < got.out_stride; ++r) {
            const float v = got.out[t * got.out_stride + r];
            if (r < r0 || r >= r1) {
                if (!(v == kSentinel)) ++touched;
                continue;
            }
            const double m = mag[t * o.rows + r];
            const double err = std::fabs(static_cast<double>(v) - want(t, r));
            const double scaled = m > 0 ? err / m : (err == 0 ? 0 : std::numeric_limits<double>::infinity());
            worst = std::max(worst, scaled);
            if (!(scaled <= rel)) {
                if (bad++ == 0)
                    first = "t=" + std::to_string(t) + " r=" + std::to_string(r) + " got " + std::to_string(v) +
                            " want " + std::to_string(want(t, r));
            }
        }
    INFO(what << ": worst error " << worst << " of Σ|w·x| (allowed " << rel << "); first bad: " << first);
    CHECK(bad == 0);
    CHECK(touched == 0);
}

struct Shape {
    int64_t rows, k, n_tokens;
};

std::vector<Shape> shapes_for(DType type) {
    std::vector<int64_t> ks = {32, 64, 96, 4096 + 32};
    if (!is_quantized(type)) ks.insert(ks.end(), {1, 3, 31, 33, 257});
    std::vector<Shape> shapes;
    for (int64_t rows : {1, 3, 31, 33, 257})
        for (int64_t k : ks)
            for (int64_t n : {1, 2, 5, 17}) shapes.push_back({rows, k, n});
    return shapes;
}

// A sub-range that starts and ends off any tile boundary where the shape allows.
std::pair<int64_t, int64_t> sub_range(int64_t rows) {
    if (rows < 3) return {0, rows};
    return {rows / 3, rows - rows / 4};
}

}  // namespace

TEST_CASE("matmul: type facts", "[kernels][matmul]") {
    for (DType t : kTypes) CHECK(matmul_supports(t));
    CHECK_FALSE(matmul_supports(DType::IQ2_XXS));
    CHECK_FALSE(matmul_supports(DType::I32));
    CHECK(vec_dot_type(DType::F32) == DType::F32);
    CHECK(vec_dot_type(DType::F16) == DType::F32);
    CHECK(vec_dot_type(DType::BF16) == DType::F32);
    CHECK(vec_dot_type(DType::Q8_0) == DType::Q8_0);
    CHECK(vec_dot_type(DType::Q4_0) == DType::Q8_0);
    CHECK(prepared_row_bytes(DType::F16, 96) == 96 * 4);
    CHECK(prepared_row_bytes(DType::Q4_0, 96) == 3 * 34);
    CHECK(prepared_row_bytes(DType::Q8_0, 0) == 0);
}

TEST_CASE("matmul: the scalar set matches a double-precision dequantized dot product", "[kernels][matmul]") {
    const MatmulKernels& scalar = scalar_matmul_kernels();
    uint32_t seed = 1;
    for (DType type : kTypes) {
        // Float weights: products rounded to float, summed in double. Quantized:
        // exact block sums, float accumulation over at most 129 blocks.
        const double rel = is_quantized(type) ? 1e-5 : 1e-6;
        for (const Shape& s : shapes_for(type)) {
            if (s.rows == 257 && s.n_tokens == 17) continue;  // covered by the other shapes; keeps this test quick
            const Operands o = make_operands(type, s.rows, s.k, s.n_tokens, seed++);
            const std::vector<double> mag = magnitudes(o);
            const Result got = run(scalar, o, 0, o.rows);
            check_result(describe(scalar, o, 0, o.rows) + " vs double", o, got, 0, o.rows, mag, rel,
                         [&](int64_t t, int64_t r) {
                             double sum = 0;
                             for (int64_t i = 0; i < o.k; ++i) sum += o.wd[r * o.k + i] * o.xd[t * o.k + i];
                             return sum;
                         });
        }
    }
}

TEST_CASE("matmul: every kernel set matches the scalar set", "[kernels][matmul]") {
    const MatmulKernels& scalar = scalar_matmul_kernels();
    const auto sets = available_matmul_kernels();
    REQUIRE(!sets.empty());
    uint32_t seed = 500;
    for (DType type : kTypes) {
        const double rel = is_quantized(type) ? 1e-6 : 1e-5;
        for (const Shape& s : shapes_for(type)) {
            const Operands o = make_operands(type, s.rows, s.k, s.n_tokens, seed++);
            const std::vector<double> mag = magnitudes(o);
            const Result want = run(scalar, o, 0, o.rows);
            for (const MatmulKernels* set : sets) {
                if (set == &scalar) continue;
                const auto [r0, r1] = sub_range(o.rows);
                for (auto [a, b] : {std::pair<int64_t, int64_t>{0, o.rows}, std::pair<int64_t, int64_t>{r0, r1}}) {
                    const Result got = run(*set, o, a, b);
                    check_result(describe(*set, o, a, b), o, got, a, b, mag, rel, [&](int64_t t, int64_t r) {
                        return static_cast<double>(want.out[t * want.out_stride + r]);
                    });
                }
            }
        }
    }
}

// Rows claimed at run time (RowClaims) by three threads give the bits of one
// call over all rows, for every set: chunk boundaries at multiples of 32 rows
// fall on the kernels' row tiles. Every row is written exactly once.
TEST_CASE("matmul: rows claimed by several threads equal one call bit for bit", "[kernels][matmul][threads]") {
    uint32_t seed = 900;
    for (const MatmulKernels* set : available_matmul_kernels()) {
        for (DType type : kTypes) {
            for (int64_t n_tokens : {1, 3, 9, 33}) {
                const Operands o = make_operands(type, 203, 96, n_tokens, seed++);
                const Result whole = run(*set, o, 0, o.rows);
                Result claimed{whole.out_stride, std::vector<float>(whole.out.size(), kSentinel)};
                constexpr int kThreads = 3;
                std::atomic<int64_t> next{kThreads};
                std::vector<std::thread> threads;
                for (int ith = 0; ith < kThreads; ++ith)
                    threads.emplace_back([&, ith] {
                        const RowClaims claims{&next, 32, ith};
                        set->matmul(o.type, o.k, o.w.data(), o.w_stride, 0, o.rows, o.x.data(), o.x_stride,
                                    o.n_tokens, claimed.out.data(), claimed.out_stride, &claims);
                    });
                for (std::thread& t : threads) t.join();
                INFO(describe(*set, o, 0, o.rows));
                REQUIRE(std::memcmp(whole.out.data(), claimed.out.data(), whole.out.size() * sizeof(float)) == 0);
            }
        }
    }
}

// The NEON sets promise more than whole row tiles (matmul_neon.cpp,
// matmul_neon_i8mm.cpp): a Q8_0 or Q4_0 output's arithmetic does not depend on
// the rows or tokens computed beside it, so any row split gives the same bits,
// and so does a batch of other tokens (of 2 or more: one token alone takes the
// decode tiles, whose float rounding the neon-i8mm set's GEMM does not share).
// Odd row counts and starts, odd token counts (the SMMLA GEMM pairs the last
// row or token with itself) and several blocks per row; against the scalar set
// within the tolerance above.
TEST_CASE("matmul: the NEON sets' Q8_0 and Q4_0 bits do not depend on the rows or tokens beside them",
          "[kernels][matmul]") {
    uint32_t seed = 1300;
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        for (int64_t n_tokens : {2, 3, 5, 17}) {
            const Operands o = make_operands(type, 37, 5 * 32, n_tokens, seed++);
            const std::vector<double> mag = magnitudes(o);
            const Result want = run(scalar_matmul_kernels(), o, 0, o.rows);
            for (const MatmulKernels* set : available_matmul_kernels()) {
                if (!set->name.starts_with("neon")) continue;
                INFO(describe(*set, o, 0, o.rows));
                const Result whole = run(*set, o, 0, o.rows);
                check_result(describe(*set, o, 0, o.rows), o, whole, 0, o.rows, mag, 1e-6, [&](int64_t t, int64_t r) {
                    return static_cast<double>(want.out[t * want.out_stride + r]);
                });
                // Rows in uneven pieces with odd starts, as a split off the tiles would give.
                Result split{whole.out_stride, std::vector<float>(whole.out.size(), kSentinel)};
                const std::pair<int64_t, int64_t> pieces[] = {{0, 1}, {1, 4}, {4, 9}, {9, 37}};
                for (auto [a, b] : pieces)
                    set->matmul(o.type, o.k, o.w.data(), o.w_stride, a, b, o.x.data(), o.x_stride, o.n_tokens,
                                split.out.data(), split.out_stride, nullptr);
                CHECK(std::memcmp(whole.out.data(), split.out.data(), whole.out.size() * sizeof(float)) == 0);
                // Tokens 1.. alone: an odd first token of the pairs becomes an even one.
                if (n_tokens < 3) continue;
                std::vector<float> rest(static_cast<size_t>((n_tokens - 1) * whole.out_stride), kSentinel);
                set->matmul(o.type, o.k, o.w.data(), o.w_stride, 0, o.rows, o.x.data() + o.x_stride, o.x_stride,
                            n_tokens - 1, rest.data(), whole.out_stride, nullptr);
                CHECK(std::memcmp(whole.out.data() + whole.out_stride, rest.data(), rest.size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("matmul: quantized weights with arbitrary codes, -128 included", "[kernels][matmul]") {
    // Files written by other tools may hold any code byte (ggml's quantizer
    // never writes -128 for Q8_0, but a file may). Scales stay finite.
    std::mt19937 rng(77);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        for (int64_t n_tokens : {1, 3, 9}) {
            Operands o = make_operands(type, 37, 320, n_tokens, 9);
            const size_t block = kiln::type_traits(type).block_bytes;
            for (int64_t r = 0; r < o.rows; ++r)
                for (int64_t b = 0; b < o.k / 32; ++b) {
                    std::byte* blk = o.w.data() + r * o.w_stride + b * block;
                    const uint16_t d = kiln::fp32_to_fp16(scale(rng));
                    std::memcpy(blk, &d, 2);
                    for (size_t j = 2; j < block; ++j) blk[j] = static_cast<std::byte>(byte(rng));
                }
            std::vector<float> row(static_cast<size_t>(o.k));
            for (int64_t r = 0; r < o.rows; ++r) {
                kiln::type_traits(type).to_float(o.w.data() + r * o.w_stride, row.data(), o.k);
                std::copy(row.begin(), row.end(), o.wd.begin() + r * o.k);
            }
            const std::vector<double> mag = magnitudes(o);
            const Result want = run(scalar_matmul_kernels(), o, 0, o.rows);
            for (const MatmulKernels* set : available_matmul_kernels()) {
                const Result got = run(*set, o, 0, o.rows);
                check_result(describe(*set, o, 0, o.rows), o, got, 0, o.rows, mag, 1e-6, [&](int64_t t, int64_t r) {
                    return static_cast<double>(want.out[t * want.out_stride + r]);
                });
            }
        }
    }
}

TEST_CASE("matmul: prepare_row matches the reference quantizer byte for byte", "[kernels][matmul]") {
    std::vector<std::vector<float>> rows;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> small(-127, 127);
    // Random rows at many scales, including ones whose 1/d is far from exact.
    for (float s : {1.0f, 1e-3f, 3e4f, 2e-5f, 0.37f, 1e-30f, 1e30f, 7.0f}) {
        std::vector<float> x(32 * 40);
        for (float& v : x) v = s * normal(rng);
        rows.push_back(x);
    }
    // Exact ties: with amax = 127 (d = 1) or 254 (d = 2), codes of the form
    // n + 0.5 must round away from zero, as roundf does.
    for (float amax : {127.0f, 254.0f, 63.5f}) {
        const float d = amax / 127.0f;
        std::vector<float> x(32 * 16);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            x[b * 32] = (b % 2 ? -amax : amax);
            for (size_t j = 1; j < 32; ++j) x[b * 32 + j] = (static_cast<float>(small(rng)) + 0.5f) * d;
        }
        rows.push_back(x);
    }
    // Values one float step either side of a tie.
    {
        std::vector<float> x(32 * 8);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            x[b * 32] = 127.0f;
            for (size_t j = 1; j < 32; ++j) {
                const float tie = static_cast<float>(small(rng)) + 0.5f;
                x[b * 32 + j] = j % 2 ? std::nextafter(tie, 1000.0f) : std::nextafter(tie, -1000.0f);
            }
        }
        rows.push_back(x);
    }
    // Special blocks: zeros, denormal scales, infinity, NaN, the largest floats.
    {
        const float inf = std::numeric_limits<float>::infinity();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1e-38f, inf, -inf, nan, 3.4e38f, -3.4e38f, 1.0f};
        std::vector<float> x(32 * 24);
        for (size_t b = 0; b < x.size() / 32; ++b)
            for (size_t j = 0; j < 32; ++j) {
                const size_t pick = (b * 7 + j * (b % 5 + 1)) % std::size(specials);
                x[b * 32 + j] = b % 3 == 0 ? specials[pick] * (j % 2 ? 1.0f : 0.5f) : specials[b % std::size(specials)];
            }
        x.resize(x.size() + 32, 0.0f);  // one all-zero block
        std::vector<float> tiny(32, 1e-39f);
        tiny[5] = -2e-39f;
        x.insert(x.end(), tiny.begin(), tiny.end());
        rows.push_back(x);
    }

    for (const MatmulKernels* set : available_matmul_kernels()) {
        for (DType type : {DType::Q8_0, DType::Q4_0}) {
            int64_t mismatched_rows = 0;
            for (const auto& x : rows) {
                const auto k = static_cast<int64_t>(x.size());
                std::vector<std::byte> want(prepared_row_bytes(type, k)), got(want.size(), std::byte{0xEE});
                kiln::quant::q8_0_from_float_ref(x.data(), want.data(), k);
                set->prepare_row(type, x.data(), k, got.data());
                if (want != got) ++mismatched_rows;
            }
            INFO(set->name << " prepare_row for " << kiln::dtype_name(type));
            CHECK(mismatched_rows == 0);
        }
        // K-quant weights: Q8_K rows (256-element blocks, padded with zeros),
        // byte for byte, including a block whose largest magnitude occurs
        // first negative, then positive (the first one sets the sign).
        int64_t mismatched_q8_k = 0;
        std::vector<std::vector<float>> k_rows = rows;
        k_rows.emplace_back(256, 0.25f);
        k_rows.back()[10] = -5.0f;
        k_rows.back()[200] = 5.0f;
        for (auto x : k_rows) {
            x.resize((x.size() + 255) / 256 * 256, 0.0f);
            const auto k = static_cast<int64_t>(x.size());
            std::vector<std::byte> want(prepared_row_bytes(DType::Q4_K, k)), got(want.size(), std::byte{0xEE});
            kiln::quant::q8_k_from_float_ref(x.data(), want.data(), k);
            set->prepare_row(DType::Q4_K, x.data(), k, got.data());
            if (want != got) ++mismatched_q8_k;
        }
        INFO(set->name << " prepare_row for q4_K");
        CHECK(mismatched_q8_k == 0);
        // Float weights: the prepared row is the activations themselves.
        std::vector<float> x(33);
        for (float& v : x) v = normal(rng);
        std::vector<float> got(x.size());
        set->prepare_row(DType::F16, x.data(), 33, got.data());
        CHECK(got == x);
    }
}

namespace {

// The amx and avx512-vnni sets where this machine runs both (amx nullptr,
// with a visible skip line, where it does not).
struct AmxAndVnni {
    const MatmulKernels* amx = nullptr;
    const MatmulKernels* vnni = nullptr;
};
AmxAndVnni amx_and_vnni() {
    AmxAndVnni sets;
    for (const MatmulKernels* set : available_matmul_kernels()) {
        if (set->name == "amx") sets.amx = set;
        if (set->name == "avx512-vnni") sets.vnni = set;
    }
    if (sets.amx == nullptr) {
        const char* why = kiln::kernels::amx_support().refusal;
        WARN("skipped: no amx kernel set on this machine (" << (why != nullptr ? why : "not built") << ")");
    }
    return sets;
}

// The amx set's product of `weights` (o's rows in `layout`, row_bytes apart)
// and o's tokens: avx512-vnni's bits, the scalar reference's values within its
// tolerance, rows outside [a, b) left alone, and the same bits for rows claimed
// by three threads.
void check_amx_product(const AmxAndVnni& sets, const Operands& o, DType layout, const std::vector<std::byte>& weights,
                       size_t row_bytes, int64_t a, int64_t b) {
    const int64_t rows = o.rows, n_tokens = o.n_tokens;
    const auto product = [&](const MatmulKernels& set, int64_t r0, int64_t r1) {
        std::vector<float> out(static_cast<size_t>(n_tokens * rows), kSentinel);
        set.matmul(layout, o.k, weights.data(), row_bytes, r0, r1, o.x.data(), o.x_stride, n_tokens, out.data(), rows,
                   nullptr);
        return out;
    };
    INFO(kiln::dtype_name(layout) << " tokens " << n_tokens);
    const std::vector<float> got = product(*sets.amx, 0, rows);
    const std::vector<float> want_bits = product(*sets.vnni, 0, rows);
    CHECK(std::memcmp(got.data(), want_bits.data(), got.size() * sizeof(float)) == 0);
    const Result ref = run(scalar_matmul_kernels(), o, 0, rows);
    const std::vector<double> mag = magnitudes(o);
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            INFO("row " << r << " token " << t);
            REQUIRE(std::fabs(got[t * rows + r] - ref.out[t * ref.out_stride + r]) <= 1e-6 * mag[t * rows + r] + 1e-30);
        }
    const std::vector<float> part = product(*sets.amx, a, b);
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            INFO("range [" << a << ", " << b << ") row " << r << " token " << t);
            if (r < a || r >= b) REQUIRE(part[t * rows + r] == kSentinel);
            else REQUIRE(std::memcmp(&part[t * rows + r], &got[t * rows + r], sizeof(float)) == 0);
        }
    std::atomic<int64_t> next{3};
    std::vector<float> claimed(static_cast<size_t>(n_tokens * rows), kSentinel);
    std::vector<std::thread> threads;
    const int64_t chunk = matmul_row_tile(layout, n_tokens);
    for (int ith = 0; ith < 3; ++ith)
        threads.emplace_back([&, ith] {
            const RowClaims claims{&next, chunk, ith};
            sets.amx->matmul(layout, o.k, weights.data(), row_bytes, 0, rows, o.x.data(), o.x_stride, n_tokens,
                             claimed.data(), rows, &claims);
        });
    for (std::thread& th : threads) th.join();
    CHECK(std::memcmp(claimed.data(), got.data(), got.size() * sizeof(float)) == 0);
}

// o's weight rows without their stride padding, interleaved when asked.
std::vector<std::byte> packed_weights(const Operands& o, size_t row_bytes, bool interleave) {
    std::vector<std::byte> plain(static_cast<size_t>(o.rows) * row_bytes);
    for (int64_t r = 0; r < o.rows; ++r)
        std::memcpy(plain.data() + r * row_bytes, o.w.data() + r * o.w_stride, row_bytes);
    if (!interleave) return plain;
    std::vector<std::byte> packed(plain.size());
    kiln::quant::interleave_rows(*kiln::quant::interleaved_type(o.type), plain.data(), o.rows, o.k, packed.data());
    return packed;
}

}  // namespace

// The amx set (AMX tiles for prompt batches of interleaved Q8_0 / Q4_0) does
// the avx512-vnni GEMM's arithmetic in its order: the same bits, on odd shapes
// (a 16-row group after whole 32-row panels, 37 blocks: a chunk of 32 and one
// of 5, partial token tiles), a row range not from the first row, and rows
// claimed by three threads. Both are also held to the scalar reference.
TEST_CASE("matmul: the amx set gives the avx512-vnni set's bits on prompt batches", "[kernels][matmul][threads][amx]") {
    const AmxAndVnni sets = amx_and_vnni();
    if (sets.amx == nullptr) return;
    REQUIRE(sets.vnni != nullptr);
    constexpr int64_t rows = 80, k = 32 * 37;
    uint32_t seed = 1700;
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        for (int64_t n_tokens : {16, 17, 33, 50}) {
            const Operands o = make_operands(type, rows, k, n_tokens, seed++);
            const auto row_bytes = static_cast<size_t>(*kiln::checked_bytes(type, k));
            check_amx_product(sets, o, *kiln::quant::interleaved_type(type), packed_weights(o, row_bytes, true),
                              row_bytes, 16, 64);
        }
    }
}

// The same for the K-quants: interleaved Q4_K/Q5_K/Q6_K with a 16-row group
// after a whole 32-row chunk, plain Q2_K..Q6_K with 37 rows (a partial group),
// 3 super-blocks, partial token tiles, a row range and claimed rows.
TEST_CASE("matmul: the amx set gives the avx512-vnni set's bits on K-quant prompt batches", "[kernels][matmul][threads][amx]") {
    const AmxAndVnni sets = amx_and_vnni();
    if (sets.amx == nullptr) return;
    REQUIRE(sets.vnni != nullptr);
    constexpr int64_t k = 256 * 3;
    uint32_t seed = 1800;
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K}) {
        for (bool interleave : {true, false}) {
            const auto interleaved = kiln::quant::interleaved_type(type);
            if (interleave && !interleaved) continue;
            const int64_t rows = interleave ? 48 : 37;
            for (int64_t n_tokens : {16, 21, 40}) {
                const Operands o = make_operands(type, rows, k, n_tokens, seed++);
                const auto row_bytes = static_cast<size_t>(*kiln::checked_bytes(type, k));
                check_amx_product(sets, o, interleave ? *interleaved : type, packed_weights(o, row_bytes, interleave),
                                  row_bytes, 16, interleave ? 32 : 35);
            }
        }
    }
}

TEST_CASE("matmul: the sets of the kernel targets", "[kernels][matmul]") {
    const auto sets = available_matmul_kernels();
    REQUIRE(!sets.empty());
    CHECK(sets.back() == &scalar_matmul_kernels());
    CHECK(sets.back()->name == "scalar");
    for (size_t i = 0; i < sets.size(); ++i)
        for (size_t j = i + 1; j < sets.size(); ++j) CHECK(sets[i]->name != sets[j]->name);
    // The active set is one of them, the one of the active target.
    bool found = false;
    for (const MatmulKernels* set : sets) found |= set == &active_matmul_kernels();
    CHECK(found);
    if (kiln::kernels::active_kernel_target() == "scalar") CHECK(&active_matmul_kernels() == &scalar_matmul_kernels());

#if defined(__x86_64__)
    // The CPU as the compiler's own detection sees it, against the targets'.
    const auto has_set = [&](std::string_view name) {
        bool has = false;
        for (const MatmulKernels* set : sets) has |= set->name == name;
        return has;
    };
    const auto built = kiln::kernels::built_kernel_targets();
    const bool portable = std::find(built.begin(), built.end(), "avx2") != built.end();
    if (portable) {
        const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("bmi2");
        CHECK(has_set("avx2") == avx2);
        const bool vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
        CHECK(has_set("avx512-vnni") == vnni);
        // "amx" where the CPU and the operating system allow the tiles.
        CHECK(has_set("amx") == (vnni && kiln::kernels::amx_support().int8));
    }
#endif
}

// Interleaved Q8_0 / Q4_0 (quant/interleave.h): the scalar set gives the plain
// scalar set's bits, every set matches it within the plain kernels' tolerance
// (decode and GEMM sizes), and rows claimed by three threads give one call's bits.
TEST_CASE("matmul: interleaved Q8_0 and Q4_0 weights", "[kernels][matmul][threads]") {
    uint32_t seed = 900;
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        // 13 and 33: the avx2 set's GEMM of interleaved Q4_0 and Q8_0 rows (fewer take its decode tiles).
        for (int64_t n_tokens : {1, 3, 4, 7, 13, 33}) {
            const Operands o = make_operands(type, 48, 96, n_tokens, seed++);
            const auto row_bytes = static_cast<size_t>(*kiln::checked_bytes(type, 96));
            std::vector<std::byte> plain(48 * row_bytes), packed(plain.size());
            for (int64_t r = 0; r < 48; ++r)
                std::memcpy(plain.data() + r * row_bytes, o.w.data() + r * o.w_stride, row_bytes);
            const DType layout = *kiln::quant::interleaved_type(type);
            kiln::quant::interleave_rows(layout, plain.data(), 48, 96, packed.data());
            const auto product = [&](const MatmulKernels& set, const RowClaims* claims) {
                std::vector<float> out(static_cast<size_t>(n_tokens * 48), kSentinel);
                set.matmul(layout, 96, packed.data(), row_bytes, 0, 48, o.x.data(), o.x_stride, n_tokens, out.data(),
                           48, claims);
                return out;
            };
            const Result want = run(scalar_matmul_kernels(), o, 0, o.rows);
            const std::vector<double> mag = magnitudes(o);
            const std::vector<float> scalar = product(scalar_matmul_kernels(), nullptr);
            for (int64_t t = 0; t < n_tokens; ++t)
                for (int64_t r = 0; r < 48; ++r) {
                    INFO(kiln::dtype_name(type) << " tokens " << n_tokens << " row " << r << " token " << t);
                    REQUIRE(scalar[t * 48 + r] == want.out[t * want.out_stride + r]);
                }
            for (const MatmulKernels* set : available_matmul_kernels()) {
                const std::vector<float> got = product(*set, nullptr);
                for (int64_t t = 0; t < n_tokens; ++t)
                    for (int64_t r = 0; r < 48; ++r) {
                        INFO(set->name << " " << kiln::dtype_name(type) << " tokens " << n_tokens << " row " << r);
                        REQUIRE(std::fabs(got[t * 48 + r] - want.out[t * want.out_stride + r]) <=
                                1e-6 * mag[t * 48 + r] + 1e-30);
                    }
                std::atomic<int64_t> next{3};
                std::vector<float> claimed(static_cast<size_t>(n_tokens * 48), kSentinel);
                std::vector<std::thread> threads;
                const int64_t chunk = matmul_row_tile(layout, n_tokens);
                for (int ith = 0; ith < 3; ++ith)
                    threads.emplace_back([&, ith] {
                        const RowClaims claims{&next, chunk, ith};
                        set->matmul(layout, 96, packed.data(), row_bytes, 0, 48, o.x.data(), o.x_stride, n_tokens,
                                    claimed.data(), 48, &claims);
                    });
                for (std::thread& th : threads) th.join();
                INFO(set->name << " claimed rows, " << kiln::dtype_name(type) << " tokens " << n_tokens);
                REQUIRE(std::memcmp(claimed.data(), got.data(), got.size() * sizeof(float)) == 0);
            }
        }
    }
}
