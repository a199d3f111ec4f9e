// Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS weights in matmul (engine/kernels/dot_legacy_ref.h).
//
// Weights: llama-quantize's bytes (quantized.<type>, 24 rows of 512) and random
// blocks (blocks.<type>) of tests/fixtures/quant_types.gguf; activations: seeded
// normal floats prepared by the kernel set (Q8_0, Q8_1 or Q8_K, as ggml pairs them).
//
// Expected value: a double-precision dot of the dequantized weights (the traits
// table's to_float, checked bit for bit against gguf-py elsewhere) and the
// dequantized prepared activations. Two things separate the kernels from it:
//  * float rounding: exact int32 block sums, then a few float operations per
//    block and one addition per block: at most (blocks + 4) float epsilons of
//    M1 = Σ_e |w_e - m_b|·|x_e| + Σ_b |m_b·s_b| (m_b the block minimum of Q4_1/Q5_1);
//  * the minimum term m_b·s_b uses Q8_1's s = fp16(d·Σq) as ggml computes it,
//    with the float d before its own rounding to fp16, while the expected
//    value multiplies the codes by the stored fp16 d: half an fp16 ulp for
//    the rounding of s and as much again for that of d, so at most
//    2^-10·(1 + 2^-11) of M2 = Σ_b |m_b·s_b|. (Half of that was assumed until
//    17 tokens found a block that needs the whole of it, in the scalar set
//    as in the others.)
// So |kernel - expected| <= (blocks + 4)·FLT_EPSILON·M1 + 2^-10·(1 + 2^-11)·M2.
// Every available kernel set is held to the same bound.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/kernels/matmul.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

using kiln::DType;
using namespace kiln::kernels;

namespace {

constexpr DType kLegacyTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS};

const kiln::GgufFile& fixture() {
    static const kiln::GgufFile file = kiln::GgufFile::open(kiln::test::fixtures_dir() / "quant_types.gguf");
    return file;
}

float half_at(const std::byte* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return kiln::fp16_to_fp32(h);
}

// Q4_1 and Q5_1 blocks keep their minimum in the fp16 after the scale.
bool has_minimum(DType t) { return t == DType::Q4_1 || t == DType::Q5_1; }

struct Expected {
    double value = 0, bound = 0;
};

Expected expected_dot(DType type, int64_t k, const std::byte* w, const std::byte* x) {
    const auto& wt = kiln::type_traits(type);
    const DType xtype = vec_dot_type(type);
    const auto& xt = kiln::type_traits(xtype);
    std::vector<float> wf(static_cast<size_t>(k)), xf(static_cast<size_t>(k));
    wt.to_float(w, wf.data(), k);
    xt.to_float(x, xf.data(), k);
    const int64_t bs = wt.block_size, blocks = k / bs;
    double value = 0, m1 = 0, m2 = 0;
    for (int64_t b = 0; b < blocks; ++b) {
        const double m = has_minimum(type) ? half_at(w + b * static_cast<int64_t>(wt.block_bytes) + 2) : 0.0;
        for (int64_t e = b * bs; e < (b + 1) * bs; ++e) {
            value += static_cast<double>(wf[e]) * xf[e];
            m1 += std::fabs(wf[e] - m) * std::fabs(xf[e]);
        }
        if (has_minimum(type)) {
            // Q8_1 blocks of 32: s is the fp16 after d.
            const int64_t per = bs / xt.block_size;
            for (int64_t i = 0; i < per; ++i) {
                const double s = half_at(x + (b * per + i) * static_cast<int64_t>(xt.block_bytes) + 2);
                m2 += std::fabs(m * s);
            }
        }
    }
    const double bound = static_cast<double>(blocks + 4) * FLT_EPSILON * (m1 + m2) +
                         std::ldexp(1.0, -10) * (1 + std::ldexp(1.0, -11)) * m2 + FLT_MIN;
    return {value, bound};
}

std::vector<float> activations(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = dist(rng);
    return x;
}

}  // namespace

TEST_CASE("legacy and IQ4 weights: types prepared as ggml pairs them", "[legacy_kernels]") {
    CHECK(vec_dot_type(DType::Q4_1) == DType::Q8_1);
    CHECK(vec_dot_type(DType::Q5_1) == DType::Q8_1);
    CHECK(vec_dot_type(DType::Q5_0) == DType::Q8_0);
    CHECK(vec_dot_type(DType::IQ4_NL) == DType::Q8_0);
    CHECK(vec_dot_type(DType::IQ4_XS) == DType::Q8_K);
    for (DType t : kLegacyTypes) CHECK(matmul_supports(t));
}

TEST_CASE("legacy and IQ4 weights: every kernel set's matmul equals the dequantized dot", "[legacy_kernels]") {
    const int64_t k = 512;
    for (DType type : kLegacyTypes) {
        const std::string name(kiln::type_traits(type).name);
        for (const std::string prefix : {"quantized.", "blocks."}) {
            const kiln::GgufTensor* t = fixture().find_tensor(prefix + name);
            REQUIRE(t != nullptr);
            REQUIRE(t->dims[0] == static_cast<uint64_t>(k));
            const auto rows = static_cast<int64_t>(t->dims[1]);
            const size_t w_stride = t->data.size() / static_cast<size_t>(rows);
            for (const MatmulKernels* set : available_matmul_kernels()) {
                INFO(name << " " << prefix << " kernels " << set->name);
                // 1, 3, 5 and 9 tokens: the decode, batched and GEMM (8 tokens or more) paths of a set.
                for (int64_t tokens : {1, 3, 5, 9}) {
                    const auto x = activations(k * tokens, static_cast<uint32_t>(tokens * 7 + rows));
                    const size_t x_stride = prepared_row_bytes(type, k);
                    std::vector<std::byte> prepared(x_stride * static_cast<size_t>(tokens));
                    for (int64_t i = 0; i < tokens; ++i)
                        set->prepare_row(type, x.data() + i * k, k, prepared.data() + i * static_cast<int64_t>(x_stride));
                    std::vector<float> out(static_cast<size_t>(rows * tokens), NAN);
                    set->matmul(type, k, t->data.data(), w_stride, 0, rows, prepared.data(), x_stride, tokens, out.data(),
                                rows, nullptr);
                    for (int64_t i = 0; i < tokens; ++i)
                        for (int64_t r = 0; r < rows; ++r) {
                            const Expected e = expected_dot(type, k, t->data.data() + r * static_cast<int64_t>(w_stride),
                                                            prepared.data() + i * static_cast<int64_t>(x_stride));
                            const double got = out[static_cast<size_t>(i * rows + r)];
                            INFO("row " << r << " token " << i << " got " << got << " expected " << e.value);
                            CHECK(std::fabs(got - e.value) <= e.bound);
                        }
                }
            }
        }
    }
}

TEST_CASE("legacy weights: odd sizes, a row range, and the same bits however the rows are split", "[legacy_kernels]") {
    for (DType type : kLegacyTypes) {
        const std::string name(kiln::type_traits(type).name);
        const kiln::GgufTensor* t = fixture().find_tensor("quantized." + name);
        REQUIRE(t != nullptr);
        const auto rows = static_cast<int64_t>(t->dims[1]);
        REQUIRE(rows >= 12);
        const size_t w_stride = t->data.size() / static_cast<size_t>(rows);
        // 7 blocks of each row (rows stay w_stride apart): an odd block count
        // (one super-block of IQ4_XS, whose rows hold two).
        const int64_t block = kiln::type_traits(type).block_size;
        const int64_t k = block == 256 ? 256 : 7 * block;
        const int64_t r0 = 1, r1 = rows - 2;  // an odd number of rows, not from the first
        for (const MatmulKernels* set : available_matmul_kernels()) {
            for (int64_t tokens : {1, 2, 7, 17}) {
                INFO(name << " kernels " << set->name << " tokens " << tokens);
                const auto x = activations(k * tokens, static_cast<uint32_t>(tokens + 100));
                const size_t x_stride = prepared_row_bytes(type, k);
                std::vector<std::byte> prepared(x_stride * static_cast<size_t>(tokens));
                for (int64_t i = 0; i < tokens; ++i)
                    set->prepare_row(type, x.data() + i * k, k, prepared.data() + i * static_cast<int64_t>(x_stride));
                std::vector<float> whole(static_cast<size_t>(rows * tokens), NAN), split = whole;
                set->matmul(type, k, t->data.data(), w_stride, r0, r1, prepared.data(), x_stride, tokens, whole.data(),
                            rows, nullptr);
                // As threads would take it: three uneven pieces.
                for (auto [a, b] : {std::pair{r0, r0 + 3}, std::pair{r0 + 3, r0 + 8}, std::pair{r0 + 8, r1}})
                    set->matmul(type, k, t->data.data(), w_stride, a, b, prepared.data(), x_stride, tokens, split.data(),
                                rows, nullptr);
                for (int64_t i = 0; i < tokens; ++i)
                    for (int64_t r = 0; r < rows; ++r) {
                        const float got = whole[static_cast<size_t>(i * rows + r)];
                        if (r < r0 || r >= r1) {
                            CHECK(std::isnan(got));  // rows outside the range are left alone
                            continue;
                        }
                        const Expected e = expected_dot(type, k, t->data.data() + r * static_cast<int64_t>(w_stride),
                                                        prepared.data() + i * static_cast<int64_t>(x_stride));
                        INFO("row " << r << " token " << i);
                        CHECK(std::fabs(got - e.value) <= e.bound);
                        CHECK(std::memcmp(&got, &split[static_cast<size_t>(i * rows + r)], sizeof(float)) == 0);
                    }
            }
        }
    }
}

TEST_CASE("legacy weights: every set prepares Q8_1 activations as the reference does, byte for byte", "[legacy_kernels]") {
    const int64_t k = 32 * 9;
    auto x = activations(k, 5);
    x[40] = 0.0f;
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;       // an all-zero block
    x[100] = 1e-39f;                                   // a denormal among normal values
    x[200] = std::numeric_limits<float>::infinity();   // a block the fast path leaves to the reference
    std::vector<std::byte> want(prepared_row_bytes(DType::Q4_1, k));
    kiln::type_traits(DType::Q8_1).from_float_ref(x.data(), want.data(), k);
    for (const MatmulKernels* set : available_matmul_kernels()) {
        INFO(set->name);
        std::vector<std::byte> got(want.size());
        set->prepare_row(DType::Q4_1, x.data(), k, got.data());
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    }
}
