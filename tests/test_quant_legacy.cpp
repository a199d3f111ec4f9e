// The legacy and IQ4 reference conversions against independent references in
// tests/fixtures/quant_types.gguf (tests/reference/make_quant_type_fixtures.py):
// `dequant.<type>` is gguf-py's numpy dequantization of the random blocks
// `blocks.<type>`; kiln's to_float must reproduce it bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/quant/blocks.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

namespace {

const kiln::GgufFile& fixture() {
    static const kiln::GgufFile file = kiln::GgufFile::open(kiln::test::fixtures_dir() / "quant_types.gguf");
    return file;
}

void check_dequantizer(kiln::DType type, const std::string& name) {
    const kiln::GgufTensor& blocks = fixture().get_tensor("blocks." + name);
    const kiln::GgufTensor& expected = fixture().get_tensor("dequant." + name);
    REQUIRE(blocks.type == type);
    REQUIRE(expected.type == kiln::DType::F32);
    REQUIRE(blocks.elements == expected.elements);
    const auto& traits = kiln::type_traits(type);
    REQUIRE(traits.to_float != nullptr);
    std::vector<float> got(blocks.elements);
    traits.to_float(blocks.data.data(), got.data(), static_cast<int64_t>(blocks.elements));
    std::vector<uint32_t> want_bits(expected.elements), got_bits(blocks.elements);
    std::memcpy(want_bits.data(), expected.data.data(), expected.data.size());
    std::memcpy(got_bits.data(), got.data(), got.size() * sizeof(float));
    for (size_t i = 0; i < got_bits.size(); ++i) {
        INFO(name << " element " << i << " got " << got[i]);
        REQUIRE(got_bits[i] == want_bits[i]);
    }
}

}  // namespace

TEST_CASE("legacy and IQ4 dequantizers equal gguf-py bit for bit", "[legacy_quants]") {
    check_dequantizer(kiln::DType::Q4_1, "q4_1");
    check_dequantizer(kiln::DType::Q5_0, "q5_0");
    check_dequantizer(kiln::DType::Q5_1, "q5_1");
    check_dequantizer(kiln::DType::IQ4_NL, "iq4_nl");
    check_dequantizer(kiln::DType::IQ4_XS, "iq4_xs");
}

namespace {

// Quantizing the fixture's `source` must give llama-quantize's bytes.
void check_quantizer(kiln::DType type, const std::string& name) {
    const kiln::GgufTensor& source = fixture().get_tensor("source");
    const kiln::GgufTensor& expected = fixture().get_tensor("quantized." + name);
    REQUIRE(expected.type == type);
    const auto& traits = kiln::type_traits(type);
    REQUIRE(traits.from_float_ref != nullptr);
    const int64_t row = static_cast<int64_t>(source.dims[0]);
    const int64_t rows = static_cast<int64_t>(source.dims[1]);
    std::vector<float> x(source.elements);
    std::memcpy(x.data(), source.data.data(), source.data.size());
    const size_t row_bytes = expected.data.size() / static_cast<size_t>(rows);
    std::vector<unsigned char> got(row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
        traits.from_float_ref(x.data() + r * row, got.data(), row);
        const auto* want = reinterpret_cast<const unsigned char*>(expected.data.data()) + r * row_bytes;
        for (size_t i = 0; i < row_bytes; ++i) {
            INFO(name << " row " << r << " byte " << i);
            REQUIRE(int(got[i]) == int(want[i]));
        }
    }
}

}  // namespace

TEST_CASE("legacy quantizers give llama-quantize's bytes", "[legacy_quants]") {
    check_quantizer(kiln::DType::Q4_1, "q4_1");
    check_quantizer(kiln::DType::Q5_0, "q5_0");
    check_quantizer(kiln::DType::Q5_1, "q5_1");
}

TEST_CASE("IQ4_NL and IQ4_XS quantizers give llama-quantize's bytes", "[legacy_quants]") {
    check_quantizer(kiln::DType::IQ4_NL, "iq4_nl");
    check_quantizer(kiln::DType::IQ4_XS, "iq4_xs");
}

// Q8_1 has no llama-quantize output; its properties follow from ggml's
// quantize_row_q8_1_ref: d = fp16(amax / 127), the largest element gets code
// +-127, codes are round(x * 127 / amax), s = fp16(d * sum of codes).
TEST_CASE("Q8_1 quantizer: scale, extreme code and sum", "[legacy_quants]") {
    std::vector<float> x(64);
    for (int i = 0; i < 64; ++i) x[i] = static_cast<float>((i * 37) % 29 - 14) * 0.25f;
    x[5] = -6.0f;   // block 0's largest magnitude
    x[40] = 10.0f;  // block 1's
    std::vector<kiln::quant::BlockQ8_1> blocks(2);
    kiln::type_traits(kiln::DType::Q8_1).from_float_ref(x.data(), blocks.data(), 64);
    const float amax[2] = {6.0f, 10.0f};
    for (int b = 0; b < 2; ++b) {
        const float d = amax[b] / 127;
        CHECK(blocks[b].d == kiln::fp32_to_fp16(d));
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            CHECK(blocks[b].qs[j] == static_cast<int>(std::round(x[b * 32 + j] * (1.0f / d))));
            sum += blocks[b].qs[j];
        }
        CHECK(blocks[b].s == kiln::fp32_to_fp16(static_cast<float>(sum) * d));
    }
    CHECK(blocks[0].qs[5] == -127);
    CHECK(blocks[1].qs[8] == 127);
    std::vector<float> back(64);
    kiln::type_traits(kiln::DType::Q8_1).to_float(blocks.data(), back.data(), 64);
    for (int i = 0; i < 64; ++i) CHECK(std::fabs(back[i] - x[i]) <= amax[i / 32] / 127 * 0.5f * 1.01f + amax[i / 32] * 1e-3f);
}
