// Tests of the reference number formats: block layouts, the traits table, and
// the f32/f16/bf16/Q8_0/Q4_0 reference conversions.
//
// Expected values are hand-derived from the format definitions or are bounds
// derived below from the algorithms; bit-exactness against an independent
// implementation (numpy) lives in test_quant_fixture.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

using kiln::DType;
using kiln::quant::BlockQ4_0;
using kiln::quant::BlockQ8_0;

namespace {

std::vector<std::byte> quantize(DType type, const std::vector<float>& x) {
    const auto& t = kiln::type_traits(type);
    std::vector<std::byte> out(*kiln::checked_bytes(type, x.size()));
    t.from_float_ref(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

std::vector<float> dequantize(DType type, const std::vector<std::byte>& q, size_t n) {
    std::vector<float> out(n);
    kiln::type_traits(type).to_float(q.data(), out.data(), static_cast<int64_t>(n));
    return out;
}

template <typename Block>
Block block_at(const std::vector<std::byte>& bytes, size_t index) {
    Block b;
    std::memcpy(&b, bytes.data() + index * sizeof(Block), sizeof(Block));
    return b;
}

// Rows with a mix of scales and shapes; a fixed seed keeps failures reproducible.
std::vector<float> random_row(size_t blocks, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    const float scales[] = {1.0f, 1e-3f, 3e4f, 2e-5f, 0.37f, 1e4f};
    std::vector<float> x(blocks * 32);
    for (size_t b = 0; b < blocks; ++b) {
        const float scale = scales[b % std::size(scales)];
        for (size_t j = 0; j < 32; ++j)
            x[b * 32 + j] = scale * (b % 2 == 0 ? normal(rng) : uniform(rng));
    }
    return x;
}

}  // namespace

TEST_CASE("quant: block layouts match ggml", "[quant]") {
    STATIC_REQUIRE(sizeof(BlockQ8_0) == 34);
    STATIC_REQUIRE(sizeof(BlockQ4_0) == 18);
    STATIC_REQUIRE(offsetof(BlockQ8_0, qs) == 2);
    STATIC_REQUIRE(offsetof(BlockQ4_0, qs) == 2);
    CHECK(kiln::type_traits(DType::Q8_0).block_bytes == sizeof(BlockQ8_0));
    CHECK(kiln::type_traits(DType::Q4_0).block_bytes == sizeof(BlockQ4_0));
    CHECK(kiln::type_traits(DType::Q8_0).block_size == kiln::quant::kQK8_0);
    CHECK(kiln::type_traits(DType::Q4_0).block_size == kiln::quant::kQK4_0);
}

TEST_CASE("quant: traits table", "[quant]") {
    struct Expect {
        DType type;
        const char* name;
        int64_t block_size;
        size_t block_bytes;
        bool quantized;
    };
    // ggml's numbers for the types kiln computes with (ggml-common.h).
    const Expect computable[] = {
        {DType::F32, "f32", 1, 4, false},   {DType::F16, "f16", 1, 2, false},
        {DType::BF16, "bf16", 1, 2, false}, {DType::Q8_0, "q8_0", 32, 34, true},
        {DType::Q4_0, "q4_0", 32, 18, true},
    };
    for (const Expect& e : computable) {
        INFO(e.name);
        const kiln::TypeTraits* t = kiln::find_type_traits(static_cast<uint32_t>(e.type));
        REQUIRE(t != nullptr);
        CHECK(t->type == e.type);
        CHECK(t->name == e.name);
        CHECK(t->block_size == e.block_size);
        CHECK(t->block_bytes == e.block_bytes);
        CHECK(t->quantized == e.quantized);
        CHECK(t->to_float != nullptr);
        CHECK(t->from_float_ref != nullptr);
        CHECK(kiln::dtype_name(e.type) == e.name);
    }
    // Known layouts without conversions are described but not computable.
    // (IQ2_XXS: kiln reads its layout but has no conversion for it.)
    const auto& iq2_xxs = kiln::type_traits(DType::IQ2_XXS);
    CHECK(iq2_xxs.block_size == 256);
    CHECK(iq2_xxs.block_bytes == 66);
    CHECK(iq2_xxs.to_float == nullptr);
    CHECK(iq2_xxs.from_float_ref == nullptr);
    // Ids ggml retired or never used.
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 40u, 1000u}) CHECK(kiln::find_type_traits(id) == nullptr);
    CHECK(kiln::all_type_traits().size() > 5);

    CHECK(kiln::parse_dtype("q8_0") == DType::Q8_0);
    CHECK(kiln::parse_dtype("Q4_0") == DType::Q4_0);
    CHECK(kiln::parse_dtype("BF16") == DType::BF16);
    CHECK(kiln::parse_dtype("f16") == DType::F16);
    CHECK(kiln::parse_dtype("q4_k") == DType::Q4_K);
    CHECK_FALSE(kiln::parse_dtype("q8").has_value());
    CHECK_FALSE(kiln::parse_dtype("").has_value());
    CHECK_FALSE(kiln::parse_dtype("f32 ").has_value());
}

TEST_CASE("quant: checked sizes reject bad counts and overflow", "[quant]") {
    CHECK(kiln::checked_bytes(DType::Q8_0, 64) == 68u);
    CHECK(kiln::checked_bytes(DType::Q4_0, 96) == 54u);
    CHECK(kiln::checked_bytes(DType::F16, 3) == 6u);
    CHECK(kiln::checked_bytes(DType::Q8_0, 0) == 0u);
    CHECK_FALSE(kiln::checked_bytes(DType::Q8_0, 33).has_value());
    CHECK_FALSE(kiln::checked_bytes(DType::Q4_0, 16).has_value());
    // 2^61 - 1 floats take 2^63 - 4 bytes, the last size that fits in 63 bits.
    const uint64_t max63 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    CHECK(kiln::checked_bytes(DType::F32, (uint64_t{1} << 61) - 1) == max63 - 3);
    CHECK_FALSE(kiln::checked_bytes(DType::F32, uint64_t{1} << 61).has_value());
    // Byte sizes past 63 bits, one of which wraps around 2^64 to a small number
    // (4 * (2^62 + 1) = 2^64 + 4) if multiplied naively.
    CHECK_FALSE(kiln::checked_bytes(DType::Q8_0, (uint64_t{1} << 63) + 32 * 7).has_value());
    CHECK_FALSE(kiln::checked_bytes(DType::F32, (uint64_t{1} << 62) + 1).has_value());

    const uint64_t fits[] = {uint64_t{1} << 32, (uint64_t{1} << 31) - 1};
    CHECK(kiln::checked_element_count(fits) == (uint64_t{1} << 63) - (uint64_t{1} << 32));
    const uint64_t too_big[] = {uint64_t{1} << 32, uint64_t{1} << 31};
    CHECK_FALSE(kiln::checked_element_count(too_big).has_value());
    const uint64_t wraps[] = {uint64_t{1} << 33, uint64_t{1} << 31, 2};
    CHECK_FALSE(kiln::checked_element_count(wraps).has_value());
    const uint64_t with_zero[] = {7, 0, 5};
    CHECK(kiln::checked_element_count(with_zero) == 0u);
    CHECK(kiln::checked_element_count(std::span<const uint64_t>{}) == 1u);
}

TEST_CASE("quant: f32, f16 and bf16 rows have little-endian bytes", "[quant]") {
    const std::vector<float> x = {1.0f, -2.0f, 65504.0f, 0.5f};
    // 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, 0.5 = 0x3800 in binary16.
    const std::vector<uint8_t> f16 = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x00, 0x38};
    // bf16 keeps the float's upper half: 0x3f80, 0xc000, 0x477fe000 -> 0x4780 (low half 0xe000 rounds up), 0x3f00.
    const std::vector<uint8_t> bf16 = {0x80, 0x3f, 0x00, 0xc0, 0x80, 0x47, 0x00, 0x3f};
    auto as_u8 = [](const std::vector<std::byte>& b) {
        std::vector<uint8_t> u(b.size());
        std::memcpy(u.data(), b.data(), b.size());
        return u;
    };
    CHECK(as_u8(quantize(DType::F16, x)) == f16);
    CHECK(as_u8(quantize(DType::BF16, x)) == bf16);
    CHECK(dequantize(DType::F16, quantize(DType::F16, x), 4) == x);
    CHECK(dequantize(DType::BF16, quantize(DType::BF16, x), 4) == std::vector<float>{1.0f, -2.0f, 65536.0f, 0.5f});
    const auto f32 = quantize(DType::F32, x);
    REQUIRE(f32.size() == 16);
    CHECK(std::memcmp(f32.data(), x.data(), 16) == 0);
    CHECK(dequantize(DType::F32, f32, 4) == x);
}

TEST_CASE("quant: Q8_0 hand-worked block", "[quant]") {
    // max |x| = 127 gives d = 1 and id = 1, so the codes are round(x) with
    // halves away from zero (roundf, not the round-to-even of rint).
    std::vector<float> x(32, 0.0f);
    const float values[] = {127.0f, 63.5f, -0.5f, 0.5f, 1.5f, 2.5f, -2.5f, -126.5f, 0.49f, -100.2f};
    const int8_t codes[] = {127, 64, -1, 1, 2, 3, -3, -127, 0, -100};
    std::copy(std::begin(values), std::end(values), x.begin());
    const auto q = quantize(DType::Q8_0, x);
    REQUIRE(q.size() == 34);
    const auto b = block_at<BlockQ8_0>(q, 0);
    CHECK(b.d == 0x3c00u);  // 1.0
    for (size_t j = 0; j < std::size(codes); ++j) CHECK(b.qs[j] == codes[j]);
    for (size_t j = std::size(codes); j < 32; ++j) CHECK(b.qs[j] == 0);
    // The d bytes come first, little-endian.
    CHECK(q[0] == std::byte{0x00});
    CHECK(q[1] == std::byte{0x3c});
    const auto y = dequantize(DType::Q8_0, q, 32);
    for (size_t j = 0; j < std::size(codes); ++j) CHECK(y[j] == static_cast<float>(codes[j]));
}

TEST_CASE("quant: Q4_0 hand-worked blocks", "[quant]") {
    // max = -8 (largest magnitude, negative) gives d = -8 / -8 = 1, id = 1:
    // code = min(15, trunc(x + 8.5)).
    std::vector<float> x(32, 0.0f);
    const float values[] = {-8.0f, 8.0f, -7.5f, -7.6f, 0.0f, 0.49f, 0.5f, 7.49f, -0.5f, -0.51f, 3.2f};
    const uint8_t codes[] = {0, 15, 1, 0, 8, 8, 9, 15, 8, 7, 11};
    std::copy(std::begin(values), std::end(values), x.begin());
    x[16] = 6.5f;   // code 15, high nibble of byte 0
    x[17] = -3.0f;  // code 5, high nibble of byte 1
    const auto q = quantize(DType::Q4_0, x);
    REQUIRE(q.size() == 18);
    const auto b = block_at<BlockQ4_0>(q, 0);
    CHECK(b.d == 0x3c00u);
    CHECK(b.qs[0] == (0 | (15 << 4)));
    CHECK(b.qs[1] == (15 | (5 << 4)));
    for (size_t j = 2; j < std::size(codes); ++j) CHECK((b.qs[j] & 0x0f) == codes[j]);
    for (size_t j = 2; j < 16; ++j) CHECK((b.qs[j] >> 4) == 8);  // zeros
    const auto y = dequantize(DType::Q4_0, q, 32);
    CHECK(y[0] == -8.0f);
    CHECK(y[1] == 7.0f);  // +8 is clamped to code 15: the one place the error reaches |d|
    CHECK(y[16] == 7.0f);
    CHECK(y[17] == -3.0f);

    // Equal magnitudes: the first wins, so the sign of d depends on the order.
    std::vector<float> pos_first(32, 1.0f), neg_first(32, 1.0f);
    pos_first[3] = 4.0f;
    pos_first[10] = -4.0f;
    neg_first[3] = -4.0f;
    neg_first[10] = 4.0f;
    CHECK(block_at<BlockQ4_0>(quantize(DType::Q4_0, pos_first), 0).d == 0xb800u);  // 4 / -8 = -0.5
    CHECK(block_at<BlockQ4_0>(quantize(DType::Q4_0, neg_first), 0).d == 0x3800u);  // -4 / -8 = 0.5
}

TEST_CASE("quant: all-zero blocks give d = 0 and zeros", "[quant]") {
    const std::vector<float> x(64, 0.0f);
    const auto q8 = quantize(DType::Q8_0, x);
    for (size_t b = 0; b < 2; ++b) {
        const auto block = block_at<BlockQ8_0>(q8, b);
        CHECK(block.d == 0);
        for (int8_t c : block.qs) CHECK(c == 0);
    }
    const auto q4 = quantize(DType::Q4_0, x);
    for (size_t b = 0; b < 2; ++b) {
        const auto block = block_at<BlockQ4_0>(q4, b);
        // d = max / -8 with max = +0 is -0 in IEEE arithmetic, so ggml stores
        // the fp16 pattern of -0 (0x8000), not 0, for an all-zero Q4_0 block.
        CHECK(block.d == 0x8000u);
        for (uint8_t c : block.qs) CHECK(c == 0x88);  // code 8 is zero
    }
    for (float v : dequantize(DType::Q8_0, q8, 64)) CHECK(v == 0.0f);
    for (float v : dequantize(DType::Q4_0, q4, 64)) CHECK(v == 0.0f);
}

// Q8_0 error bound. With d = fl(amax / 127), id = fl(1 / d), q = round(fl(x * id)):
// fl(x * id) = (x / d)(1 + e) with |e| <= 2^-23 (two roundings) and |x / d| <= 127,
// so |q - x / d| <= 0.5 + 127 * 2^-23 < 0.5 + 2e-5, i.e. |x - q d| <= d (0.5 + 2e-5).
// Dequantization uses D = fp16(d) instead of d, adding |q| |d - D| <= 127 |d - D|;
// q * D itself is exact in float (7 + 11 significant bits). The fp16 rounding is
// far from tiny: 127 * 2^-11 d ~ 0.062 d, so it is part of the bound, not slack.
// And D itself must be d rounded to fp16: |d - D| <= max(2^-11 d, 2^-25).
TEST_CASE("quant: Q8_0 round-trip error bound", "[quant]") {
    const size_t blocks = 600;
    const auto x = random_row(blocks, 1234);
    const auto q = quantize(DType::Q8_0, x);
    const auto y = dequantize(DType::Q8_0, q, x.size());
    for (size_t b = 0; b < blocks; ++b) {
        float amax = 0.0f;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const double d = amax / 127.0f;
        const double D = kiln::fp16_to_fp32(block_at<BlockQ8_0>(q, b).d);
        REQUIRE(std::fabs(d - D) <= std::max(d * 0x1p-11, 0x1p-25));
        const double bound = d * (0.5 + 2e-5) + 127.0 * std::fabs(d - D);
        for (size_t j = 0; j < 32; ++j) {
            INFO("block " << b << " element " << j << " x " << x[b * 32 + j] << " y " << y[b * 32 + j]);
            REQUIRE(std::fabs(static_cast<double>(x[b * 32 + j]) - y[b * 32 + j]) <= bound);
        }
    }
}

// Q4_0 error bound. With d = fl(max / -8), id = fl(1 / d), t = x / d in [-8, 8]:
// fl(x * id) is within 8 * 2^-23 of t and adding 8.5 rounds by at most 2^-20
// (values below 16.5), so s = fl(fl(x * id) + 8.5) is within 3e-6 of t + 8.5.
// The code is trunc(s) = floor(s) (s >= 0), clamped to 15:
//  - for t < 7.5 the code is floor(t + 8.5) (+-1 at a boundary the 3e-6 can
//    cross), so |t - (code - 8)| <= 0.5 + 3e-6;
//  - for t >= 7.5 (elements opposite in sign to max, |x| >= 15/16 |max|) the clamp
//    gives code 15, and |t - 7| <= 1 + 3e-6: there the error reaches |d|.
// The extreme itself (t = -8) gets code 0 and comes back as -8 D, i.e. max rounded.
// With D = fp16(d) in place of d the error grows by |code - 8| |d - D| <= 8 |d - D|.
TEST_CASE("quant: Q4_0 round-trip error bound", "[quant]") {
    const size_t blocks = 600;
    auto x = random_row(blocks, 99);
    // Put an element of the opposite sign and (almost) equal magnitude into some
    // blocks so the clamped side of the range is exercised.
    for (size_t b = 0; b < blocks; b += 3) {
        size_t arg = 0;
        for (size_t j = 1; j < 32; ++j)
            if (std::fabs(x[b * 32 + j]) > std::fabs(x[b * 32 + arg])) arg = j;
        x[b * 32 + (arg + 5) % 32] = -x[b * 32 + arg] * (b % 2 ? 0.97f : 0.999f);
    }
    const auto q = quantize(DType::Q4_0, x);
    const auto y = dequantize(DType::Q4_0, q, x.size());
    size_t clamped = 0;
    for (size_t b = 0; b < blocks; ++b) {
        float amax = 0.0f, max = 0.0f;
        size_t arg = 0;
        for (size_t j = 0; j < 32; ++j) {
            if (std::fabs(x[b * 32 + j]) > amax) {
                amax = std::fabs(x[b * 32 + j]);
                max = x[b * 32 + j];
                arg = j;
            }
        }
        const double d = max / -8.0f;
        const double D = kiln::fp16_to_fp32(block_at<BlockQ4_0>(q, b).d);
        REQUIRE(std::fabs(d - D) <= std::max(std::fabs(d) * 0x1p-11, 0x1p-25));
        CHECK(y[b * 32 + arg] == static_cast<float>(-8.0 * D));
        for (size_t j = 0; j < 32; ++j) {
            const double t = x[b * 32 + j] / d;
            const bool clamp_side = t >= 7.5 - 1e-5;
            clamped += clamp_side;
            const double bound = std::fabs(d) * ((clamp_side ? 1.0 : 0.5) + 3e-6) + 8.0 * std::fabs(d - D);
            INFO("block " << b << " element " << j << " x " << x[b * 32 + j] << " y " << y[b * 32 + j]);
            REQUIRE(std::fabs(static_cast<double>(x[b * 32 + j]) - y[b * 32 + j]) <= bound);
        }
    }
    CHECK(clamped > 50);  // the special case was really tested
}

TEST_CASE("quant: a single huge value dominates its block only", "[quant]") {
    std::vector<float> x(96);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 1e-3f * static_cast<float>(static_cast<int>(i % 7) - 3);
    x[40] = 12000.0f;  // in block 1
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        INFO(kiln::dtype_name(type));
        const auto y = dequantize(type, quantize(type, x), x.size());
        // d is ~94 (Q8_0) or -1500 (Q4_0): every small value of block 1 becomes 0,
        // while blocks 0 and 2 keep their own fine scale.
        for (size_t i = 32; i < 64; ++i)
            if (i != 40) CHECK(y[i] == 0.0f);
        // Only the roundings of d (float, then fp16) separate the spike from its value.
        CHECK(std::fabs(y[40] - 12000.0f) <= 12000.0f * (0x1p-11 + 0x1p-20));
        // Blocks 0 and 2 (|x| <= 3e-3) keep a scale of their own: errors stay
        // within Q4_0's worst case |d| = 3e-3 / 8 instead of reaching 3e-3.
        for (size_t i = 0; i < 96; ++i)
            if (i < 32 || i >= 64) CHECK(std::fabs(y[i] - x[i]) <= 3.8e-4f);
    }
}

TEST_CASE("quant: blocks are read and written at unaligned addresses", "[quant]") {
    const auto x = random_row(5, 7);
    for (DType type : {DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16}) {
        INFO(kiln::dtype_name(type));
        const auto& t = kiln::type_traits(type);
        const auto aligned = quantize(type, x);
        std::vector<std::byte> buffer(aligned.size() + 1);
        t.from_float_ref(x.data(), buffer.data() + 1, static_cast<int64_t>(x.size()));
        CHECK(std::memcmp(buffer.data() + 1, aligned.data(), aligned.size()) == 0);
        std::vector<float> y(x.size());
        t.to_float(buffer.data() + 1, y.data(), static_cast<int64_t>(y.size()));
        CHECK(y == dequantize(type, aligned, x.size()));
    }
}

// Requantizing dequantized data. For Q8_0 the block's largest |x| got code
// +-127 (fl(amax * id) is within 2 ulps of 127), so the dequantized block's amax
// is exactly 127 D, d' = fl(127 D / 127) = D and fp16(D) = D: the same scale
// bytes. Each dequantized value q D is exact, and fl(q D * fl(1 / D)) =
// q (1 + e) with |q e| <= 127 * 2^-23 < 0.5, which rounds back to q. Q4_0 works
// the same way: the first code-0 element becomes the max (-8 D), d' = D, and
// fl((c - 8) D * fl(1 / D)) + 8.5 stays within 2^-20 of c + 0.5, truncating to c.
// Both need D finite and non-zero: when d is below fp16's range (|x| ~ 1e-9),
// D = 0 while the codes are not, and requantization gives all-zero codes.
TEST_CASE("quant: requantizing a dequantized row gives the same bytes", "[quant]") {
    auto x = random_row(300, 4242);
    // A block whose d is an fp16 subnormal (d ~ 8e-8): the property still holds.
    for (size_t j = 0; j < 32; ++j) x[32 + j] = 1e-5f * std::sin(static_cast<float>(j));
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
        INFO(kiln::dtype_name(type));
        const auto q = quantize(type, x);
        const auto y = dequantize(type, q, x.size());
        CHECK(quantize(type, y) == q);
    }

    std::vector<float> tiny(32);
    for (size_t j = 0; j < 32; ++j) tiny[j] = 1e-9f * static_cast<float>(j + 1);
    const auto q = quantize(DType::Q8_0, tiny);
    const auto first = block_at<BlockQ8_0>(q, 0);
    REQUIRE(first.d == 0);  // d = 32e-9 / 127 ~ 2.5e-10 is far below 2^-25
    CHECK(first.qs[31] == 127);
    const auto again = block_at<BlockQ8_0>(quantize(DType::Q8_0, dequantize(DType::Q8_0, q, 32)), 0);
    CHECK(again.d == 0);
    CHECK(again.qs[31] == 0);
}
