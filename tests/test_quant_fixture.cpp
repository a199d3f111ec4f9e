// kiln's reference conversions against an independent implementation: the
// numpy script tests/reference/make_quant_fixture.py quantized the same float32
// data and stored the results in tests/fixtures/quant_reference.gguf. Bytes must
// match exactly; so must the dequantized floats (bit for bit, signed zeros too).
//
// The data includes rows built to catch the classic slips: roundf vs round-to-
// even, rounding the exact product instead of the float32 one (Q8_0), a fused
// multiply-add in Q4_0's x * id + 8.5, amax * (1 / 127) for amax / 127, first-wins
// ties for the Q4_0 maximum, fp16/bf16 ties (of values and of the scales d),
// subnormals, fp16 overflow and scales that flush to zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

namespace {

constexpr uint64_t kRow = 96;
constexpr uint64_t kRows = 13;

const kiln::GgufFile& fixture() {
    static const kiln::GgufFile file = kiln::GgufFile::open(kiln::test::fixtures_dir() / "quant_reference.gguf");
    return file;
}

const kiln::GgufTensor& tensor(const std::string& name, kiln::DType type) {
    const kiln::GgufTensor& t = fixture().get_tensor(name);
    INFO("tensor " << name);
    REQUIRE(t.type == type);
    REQUIRE(t.dims == std::vector<uint64_t>{kRow, kRows});
    REQUIRE(t.elements == kRow * kRows);
    REQUIRE(t.data.size() == *kiln::checked_bytes(type, kRow * kRows));
    return t;
}

std::vector<float> floats_of(const kiln::GgufTensor& t) {
    std::vector<float> out(t.elements);
    std::memcpy(out.data(), t.data.data(), t.data.size());
    return out;
}

// Index of the first differing byte, or -1; reported so a failure names a block.
int64_t first_difference(const std::vector<std::byte>& a, std::span<const std::byte> b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return static_cast<int64_t>(i);
    return -1;
}

}  // namespace

TEST_CASE("quant fixture: file as the script wrote it", "[quant][fixture]") {
    CHECK(fixture().version() == 3u);
    CHECK(fixture().get_string("general.architecture") == "kiln-fixture");
    CHECK(fixture().tensors().size() == 7);
}

TEST_CASE("quant fixture: reference quantizers reproduce numpy's bytes", "[quant][fixture]") {
    const std::vector<float> source = floats_of(tensor("source", kiln::DType::F32));
    const struct {
        const char* name;
        kiln::DType type;
        size_t unit;  // bytes per block, to name the failing block
    } cases[] = {
        {"q8_0", kiln::DType::Q8_0, 34},
        {"q4_0", kiln::DType::Q4_0, 18},
        {"f16", kiln::DType::F16, 2},
        {"bf16", kiln::DType::BF16, 2},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        const kiln::GgufTensor& expected = tensor(c.name, c.type);
        std::vector<std::byte> got(expected.data.size());
        kiln::type_traits(c.type).from_float_ref(source.data(), got.data(), static_cast<int64_t>(source.size()));
        const int64_t diff = first_difference(got, expected.data);
        INFO("first differing byte " << diff << " (block/element " << (diff < 0 ? -1 : diff / static_cast<int64_t>(c.unit))
                                     << ")");
        CHECK(diff == -1);
    }
}

TEST_CASE("quant fixture: scales that are fp16 ties round to even", "[quant][fixture]") {
    // Row 12 of the script: in block 37 amax = 127 m, m halfway between f16
    // 0x2e65 and 0x2e66, so d = m exactly and must round to the even 0x2e66; in
    // block 38 Q4_0's d = -m', m' halfway between 0x3122 and 0x3123: to 0xb122.
    auto d_of = [](const kiln::GgufTensor& t, size_t block, size_t block_bytes) {
        uint16_t d;
        std::memcpy(&d, t.data.data() + block * block_bytes, 2);
        return d;
    };
    CHECK(d_of(tensor("q8_0", kiln::DType::Q8_0), 37, 34) == 0x2e66u);
    CHECK(d_of(tensor("q4_0", kiln::DType::Q4_0), 38, 18) == 0xb122u);
}

TEST_CASE("quant fixture: dequantization reproduces numpy's floats", "[quant][fixture]") {
    const struct {
        const char* blocks;
        kiln::DType type;
        const char* dequant;
    } cases[] = {
        {"q8_0", kiln::DType::Q8_0, "q8_0_dequant"},
        {"q4_0", kiln::DType::Q4_0, "q4_0_dequant"},
    };
    for (const auto& c : cases) {
        INFO(c.blocks);
        const kiln::GgufTensor& blocks = tensor(c.blocks, c.type);
        const kiln::GgufTensor& expected = tensor(c.dequant, kiln::DType::F32);
        std::vector<float> got(blocks.elements);
        // Straight from the mapping: GGUF blocks are not 2-byte aligned in general.
        kiln::type_traits(c.type).to_float(blocks.data.data(), got.data(), static_cast<int64_t>(got.size()));
        std::vector<std::byte> got_bytes(got.size() * sizeof(float));
        std::memcpy(got_bytes.data(), got.data(), got_bytes.size());
        const int64_t diff = first_difference(got_bytes, expected.data);
        INFO("first differing element " << (diff < 0 ? -1 : diff / 4));
        CHECK(diff == -1);
    }
}

TEST_CASE("quant fixture: 16-bit floats convert back as numpy widened them", "[quant][fixture]") {
    // f16 -> f32 and bf16 -> f32 are exact, so converting the stored halves back
    // must give the source rounded once: within half an ulp of the format.
    const std::vector<float> source = floats_of(tensor("source", kiln::DType::F32));
    for (kiln::DType type : {kiln::DType::F16, kiln::DType::BF16}) {
        const bool f16 = type == kiln::DType::F16;
        INFO(kiln::dtype_name(type));
        const kiln::GgufTensor& t = tensor(f16 ? "f16" : "bf16", type);
        std::vector<float> back(t.elements);
        kiln::type_traits(type).to_float(t.data.data(), back.data(), static_cast<int64_t>(back.size()));
        for (size_t i = 0; i < back.size(); ++i) {
            const double x = source[i];
            const double rel = f16 ? 0x1p-11 : 0x1p-8;
            const double floor_abs = f16 ? 0x1p-25 : 0x1p-134;  // half the smallest subnormal step
            INFO("element " << i << " x " << x << " back " << back[i]);
            if (f16 && std::fabs(x) >= 65520.0) {
                CHECK(std::isinf(back[i]));
            } else {
                CHECK(std::fabs(back[i] - x) <= std::max(std::fabs(x) * rel, floor_abs));
            }
        }
    }
}
