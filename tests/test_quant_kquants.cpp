// The K-quants Q2_K..Q6_K against llama.cpp itself (tests/fixtures/quant_types.gguf,
// written by tests/reference/make_quant_type_fixtures.py from llama.cpp c392e509):
// dequantizing random blocks must give gguf-py's floats bit for bit, and
// quantizing the designed `source` rows must give llama-quantize's bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/quant/blocks.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

namespace {

constexpr int64_t kRow = 512;

const kiln::GgufFile& fixture() {
    static const kiln::GgufFile file = kiln::GgufFile::open(kiln::test::fixtures_dir() / "quant_types.gguf");
    return file;
}

struct KType {
    const char* name;
    kiln::DType type;
};
constexpr KType kTypes[] = {
    {"q2_K", kiln::DType::Q2_K}, {"q3_K", kiln::DType::Q3_K}, {"q4_K", kiln::DType::Q4_K},
    {"q5_K", kiln::DType::Q5_K}, {"q6_K", kiln::DType::Q6_K},
};

std::vector<float> floats_of(const kiln::GgufTensor& t) {
    REQUIRE(t.type == kiln::DType::F32);
    std::vector<float> out(t.elements);
    std::memcpy(out.data(), t.data.data(), t.data.size());
    return out;
}

uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

std::vector<float> dequantize(kiln::DType type, const void* data, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    kiln::type_traits(type).to_float(data, out.data(), n);
    return out;
}

std::vector<std::byte> quantize(kiln::DType type, const float* x, int64_t n) {
    std::vector<std::byte> out(*kiln::checked_bytes(type, static_cast<uint64_t>(n)));
    kiln::type_traits(type).from_float_ref(x, out.data(), n);
    return out;
}

}  // namespace

TEST_CASE("kquants: dequantization equals gguf-py bit for bit", "[kquants]") {
    for (const KType& k : kTypes) {
        INFO(k.name);
        const kiln::GgufTensor& blocks = fixture().get_tensor(std::string("blocks.") + k.name);
        REQUIRE(blocks.type == k.type);
        const std::vector<float> expected = floats_of(fixture().get_tensor(std::string("dequant.") + k.name));
        REQUIRE(expected.size() == blocks.elements);
        const std::vector<float> got = dequantize(k.type, blocks.data.data(), static_cast<int64_t>(blocks.elements));
        int64_t first = -1;
        for (size_t i = 0; i < got.size() && first < 0; ++i)
            if (bits_of(got[i]) != bits_of(expected[i])) first = static_cast<int64_t>(i);
        INFO("first differing element " << first << (first >= 0 ? " got " + std::to_string(got[first]) + " expected " +
                                                                      std::to_string(expected[first])
                                                                : std::string()));
        CHECK(first == -1);
    }
}

TEST_CASE("kquants: llama-quantize's bytes dequantize close to the source", "[kquants]") {
    const std::vector<float> source = floats_of(fixture().get_tensor("source"));
    const int64_t rows = static_cast<int64_t>(source.size()) / kRow;
    for (const KType& k : kTypes) {
        INFO(k.name);
        const kiln::GgufTensor& q = fixture().get_tensor(std::string("quantized.") + k.name);
        REQUIRE(q.type == k.type);
        const std::vector<float> back = dequantize(k.type, q.data.data(), static_cast<int64_t>(q.elements));
        for (int64_t r = 0; r < rows; ++r) {
            // Loose: the error of each element is within 60% of its row's largest
            // magnitude (Q2_K on outlier rows is coarse), and nothing is NaN. Rows
            // far below fp16's range (row 13, 1e-30) have scales that flush to zero.
            float amax = 0;
            for (int64_t i = 0; i < kRow; ++i) amax = std::max(amax, std::fabs(source[r * kRow + i]));
            const bool flushes = amax < 1e-20f;
            for (int64_t i = 0; i < kRow; ++i) {
                const float x = source[r * kRow + i], y = back[r * kRow + i];
                INFO("row " << r << " element " << i << " x " << x << " back " << y);
                REQUIRE(std::isfinite(y));
                if (flushes)
                    REQUIRE(y == 0.0f);
                else
                    REQUIRE(std::fabs(y - x) <= 0.6f * amax);
            }
        }
    }
}

TEST_CASE("kquants: reference quantizers reproduce llama-quantize's bytes", "[kquants]") {
    const std::vector<float> source = floats_of(fixture().get_tensor("source"));
    const int64_t rows = static_cast<int64_t>(source.size()) / kRow;
    for (const KType& k : kTypes) {
        const kiln::GgufTensor& expected = fixture().get_tensor(std::string("quantized.") + k.name);
        REQUIRE(expected.type == k.type);
        const size_t row_bytes = *kiln::checked_bytes(k.type, kRow);
        REQUIRE(expected.data.size() == row_bytes * static_cast<size_t>(rows));
        int differing_rows = 0;
        std::string first;
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<std::byte> got = quantize(k.type, source.data() + r * kRow, kRow);
            for (size_t b = 0; b < row_bytes; ++b) {
                if (got[b] != expected.data[r * row_bytes + b]) {
                    if (differing_rows++ == 0)
                        first = "row " + std::to_string(r) + " byte " + std::to_string(b) + " (block " +
                                std::to_string(b / kiln::type_traits(k.type).block_bytes) + ")";
                    break;
                }
            }
        }
        INFO(k.name << ": " << differing_rows << " of " << rows << " rows differ; first at " << first);
        CHECK(differing_rows == 0);
    }
}

TEST_CASE("kquants: a whole tensor in one call equals row by row", "[kquants]") {
    // 24 rows of 2 super-blocks as one 48-block call: blocks are independent.
    const std::vector<float> source = floats_of(fixture().get_tensor("source"));
    for (const KType& k : kTypes) {
        INFO(k.name);
        const kiln::GgufTensor& expected = fixture().get_tensor(std::string("quantized.") + k.name);
        const std::vector<std::byte> got = quantize(k.type, source.data(), static_cast<int64_t>(source.size()));
        CHECK(std::memcmp(got.data(), expected.data.data(), got.size()) == 0);
    }
}

namespace {

// Quantizes and dequantizes n values; returns the floats.
std::vector<float> round_trip(kiln::DType type, const std::vector<float>& x) {
    const std::vector<std::byte> q = quantize(type, x.data(), static_cast<int64_t>(x.size()));
    return dequantize(type, q.data(), static_cast<int64_t>(x.size()));
}

}  // namespace

TEST_CASE("kquants: zeros, tiny and ordinary blocks round-trip sensibly", "[kquants]") {
    for (const KType& k : kTypes) {
        INFO(k.name);
        SECTION(std::string("zeros ") + k.name) {
            const std::vector<float> back = round_trip(k.type, std::vector<float>(3 * kiln::quant::kQK_K, 0.0f));
            for (float y : back) REQUIRE(y == 0.0f);
        }
        SECTION(std::string("tiny ") + k.name) {
            // Below GROUP_MAX_EPS or under fp16's subnormals: every value comes back 0.
            std::vector<float> x(kiln::quant::kQK_K);
            for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0 ? -1e-20f : 3e-21f) * static_cast<float>(i % 7);
            for (float y : round_trip(k.type, x)) REQUIRE(y == 0.0f);
        }
        SECTION(std::string("ramp of 3 super-blocks ") + k.name) {
            // An evenly spread block: each type's error stays under a step of its grid.
            std::vector<float> x(3 * kiln::quant::kQK_K);
            for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
            const std::vector<float> back = round_trip(k.type, x);
            const float bound = k.type == kiln::DType::Q2_K ? 1.0f : k.type == kiln::DType::Q3_K ? 0.6f : 0.3f;
            for (size_t i = 0; i < x.size(); ++i) {
                INFO("element " << i << " x " << x[i] << " back " << back[i]);
                REQUIRE(std::fabs(back[i] - x[i]) <= bound);
            }
        }
    }
}

TEST_CASE("kquants: huge and non-finite inputs give a defined block", "[kquants]") {
    // Scales past fp16's range and inf/NaN inputs have no meaningful result; the
    // quantizers must still finish without undefined behaviour (the sanitizer
    // build checks that) and produce the same bytes every time.
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> x(4 * kiln::quant::kQK_K);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i));
    for (size_t i = 0; i < kiln::quant::kQK_K; ++i) x[i] *= 1e30f;  // block 0: scales overflow fp16
    x[kiln::quant::kQK_K + 5] = inf;                                 // block 1
    x[2 * kiln::quant::kQK_K + 17] = nan;                            // block 2
    x[3 * kiln::quant::kQK_K + 40] = -inf;                           // block 3
    for (const KType& k : kTypes) {
        INFO(k.name);
        const std::vector<std::byte> a = quantize(k.type, x.data(), static_cast<int64_t>(x.size()));
        const std::vector<std::byte> b = quantize(k.type, x.data(), static_cast<int64_t>(x.size()));
        CHECK(a == b);
        (void)dequantize(k.type, a.data(), static_cast<int64_t>(x.size()));
    }
}
