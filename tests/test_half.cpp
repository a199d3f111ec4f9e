// Tests of the scalar fp16/bf16 conversions in engine/core/half.h.
//
// The expected values never come from half.h itself: they are either the x86
// F16C instructions (when the build targets them) or values worked out by hand
// from the IEEE 754 binary16 / bfloat16 definitions.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/half.h"
#include "engine/kernels/convert.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "engine/kernels/cpu_features.h"
#endif

namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t u) { return std::bit_cast<float>(u); }

bool is_fp16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

}  // namespace

TEST_CASE("fp16: hand-derived conversions from float", "[half]") {
    struct Case {
        uint32_t f32;
        uint16_t f16;
        const char* why;
    };
    // Each row derived from the binary16 layout: 1 sign, 5 exponent (bias 15),
    // 10 mantissa bits; subnormals are m * 2^-24.
    const Case cases[] = {
        {0x3f800000u, 0x3c00u, "1.0: exponent 15, mantissa 0"},
        {0xbf800000u, 0xbc00u, "-1.0"},
        {0x00000000u, 0x0000u, "+0"},
        {0x80000000u, 0x8000u, "-0 keeps its sign"},
        {0x477fe000u, 0x7bffu, "65504, the largest finite f16"},
        {0x477fefffu, 0x7bffu, "just below the 65520 midpoint rounds down"},
        {0x477ff000u, 0x7c00u, "65520 is a tie with 65536; 0x7bff is odd so it rounds up to inf"},
        {0x47800000u, 0x7c00u, "65536 overflows"},
        {0xc77ff000u, 0xfc00u, "-65520 to -inf"},
        {0x7f800000u, 0x7c00u, "inf"},
        {0xff800000u, 0xfc00u, "-inf"},
        {0x33800000u, 0x0001u, "2^-24, the smallest subnormal"},
        {0x33000000u, 0x0000u, "2^-25 ties between 0 and 2^-24: to even 0"},
        {0x33000001u, 0x0001u, "just above 2^-25 rounds up"},
        {0x33c00000u, 0x0002u, "3*2^-25 ties between 1 and 2 (units of 2^-24): to even 2"},
        {0x34200000u, 0x0002u, "5*2^-25 ties between 2 and 3: to even 2"},
        {0x387fc000u, 0x03ffu, "1023*2^-24, the largest subnormal"},
        {0x387fe000u, 0x0400u, "1023.5*2^-24 ties, rounds to even 1024: the smallest normal"},
        {0x38800000u, 0x0400u, "2^-14, the smallest normal"},
        {0x3f801000u, 0x3c00u, "1 + 2^-11 ties between 1 and 1+2^-10: to even 1"},
        {0x3f803000u, 0x3c02u, "1 + 3*2^-11 ties: to even mantissa 2"},
        {0x3f801001u, 0x3c01u, "just above the tie rounds up"},
        {0x3effffffu, 0x3800u, "just below 0.5 rounds to 0.5"},
        {0x40490fdbu, 0x4248u, "pi: 0x4248 = 3.140625"},
        {0x7fc00000u, 0x7e00u, "quiet NaN"},
        {0x7f800001u, 0x7e00u, "signalling NaN becomes quiet (payload below bit 13 dropped)"},
        {0xffc02000u, 0xfe01u, "negative NaN keeps sign and top payload bits"},
    };
    for (const Case& c : cases) {
        INFO(c.why);
        CHECK(kiln::fp32_to_fp16(float_of(c.f32)) == c.f16);
    }
}

TEST_CASE("fp16: hand-derived conversions to float", "[half]") {
    CHECK(bits_of(kiln::fp16_to_fp32(0x3c00u)) == 0x3f800000u);
    CHECK(bits_of(kiln::fp16_to_fp32(0x0001u)) == 0x33800000u);  // 2^-24
    CHECK(bits_of(kiln::fp16_to_fp32(0x0003u)) == 0x34400000u);  // 3*2^-24
    CHECK(bits_of(kiln::fp16_to_fp32(0x03ffu)) == 0x387fc000u);  // 1023*2^-24
    CHECK(bits_of(kiln::fp16_to_fp32(0x8200u)) == 0xb8000000u);  // -2^-15
    CHECK(bits_of(kiln::fp16_to_fp32(0x7bffu)) == 0x477fe000u);  // 65504
    CHECK(bits_of(kiln::fp16_to_fp32(0x8000u)) == 0x80000000u);
    CHECK(bits_of(kiln::fp16_to_fp32(0xfc00u)) == 0xff800000u);
    CHECK(bits_of(kiln::fp16_to_fp32(0x7e00u)) == 0x7fc00000u);
    CHECK(bits_of(kiln::fp16_to_fp32(0x7c01u)) == 0x7fc02000u);  // signalling NaN comes back quiet
}

TEST_CASE("fp16: every pattern survives a round trip through float", "[half]") {
    int nans = 0;
    for (uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<uint16_t>(i);
        const float f = kiln::fp16_to_fp32(h);
        const uint16_t back = kiln::fp32_to_fp16(f);
        if (is_fp16_nan(h)) {
            ++nans;
            REQUIRE(std::isnan(f));
            // Quiet NaNs come back bit for bit; signalling ones gain the quiet bit.
            REQUIRE(back == (h | 0x0200u));
        } else {
            REQUIRE(back == h);
            // The value is exact: compare against the IEEE formula in double.
            const int exponent = (h >> 10) & 0x1f;
            const int mantissa = h & 0x3ff;
            double expected = exponent == 0x1f ? std::numeric_limits<double>::infinity()
                              : exponent == 0  ? std::ldexp(mantissa, -24)
                                               : std::ldexp(1024 + mantissa, exponent - 25);
            if (h & 0x8000u) expected = -expected;
            REQUIRE(static_cast<double>(f) == expected);
            REQUIRE(std::signbit(f) == ((h & 0x8000u) != 0));
        }
    }
    CHECK(nans == 2 * 1023);
}

#if defined(__x86_64__)
// The instructions themselves, whatever the build's flags (the suite is built
// for the x86-64 baseline); called only where the CPU has F16C.
[[gnu::target("f16c")]] uint16_t f16c_from_float(float f) { return static_cast<uint16_t>(_cvtss_sh(f, 0)); }
[[gnu::target("f16c")]] float f16c_to_float(uint16_t h) { return _cvtsh_ss(h); }

TEST_CASE("fp16: bit-identical to the F16C instructions", "[half]") {
    if (!kiln::kernels::cpu_features().x86_64_v3) {  // v3 includes F16C
        WARN("this CPU has no F16C: not compared");
        return;
    }
    uint64_t compared = 0;
    auto check = [&](uint32_t u) {
        const float f = float_of(u);
        const auto expected = f16c_from_float(f);
        const uint16_t got = kiln::fp32_to_fp16(f);
        if (got != expected) {
            INFO("float bits " << std::hex << u << ": expected " << expected << ", got " << got);
            REQUIRE(got == expected);
        }
        ++compared;
    };
    // A fixed-stride sweep over all 2^32 float bit patterns. The stride is odd and
    // not a multiple of 2^13, so the dropped low mantissa bits take many values.
    constexpr uint64_t kStride = 1021;
    for (uint64_t u = 0; u <= 0xffffffffu; u += kStride) check(static_cast<uint32_t>(u));
    // Around the midpoint between every pair of neighbouring finite f16 values
    // (both signs), and at each value itself: the tie, one float ulp either side.
    for (uint32_t h = 0; h < 0x7c00u; ++h) {
        for (uint32_t sign : {0u, 0x8000u}) {
            const float lo = f16c_to_float(static_cast<uint16_t>(sign | h));
            const float hi = f16c_to_float(static_cast<uint16_t>(sign | (h + 1)));
            // Both are f16 values (11 significant bits), so the midpoint is exact in float.
            const uint32_t mid = bits_of((lo + hi) * 0.5f);
            for (uint32_t m : {mid - 1, mid, mid + 1, bits_of(lo)}) check(m);
        }
    }
    const uint64_t sweep = 0xffffffffull / kStride + 1;
    // 4,206,629 sweep values + 253,952 around f16 values = 4,460,581 floats.
    CHECK(compared == sweep + 2ull * 0x7c00u * 4);

    for (uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<uint16_t>(i);
        const uint32_t expected = bits_of(f16c_to_float(h));
        REQUIRE(bits_of(kiln::fp16_to_fp32(h)) == expected);
    }
}
#endif

TEST_CASE("bf16: hand-derived rounding", "[half]") {
    struct Case {
        uint32_t f32;
        uint16_t bf16;
        const char* why;
    };
    // bf16 is the top half of a float; the dropped half decides the rounding.
    const Case cases[] = {
        {0x3f800000u, 0x3f80u, "1.0 is exact"},
        {0x3f808000u, 0x3f80u, "tie, kept half even: stays"},
        {0x3f818000u, 0x3f82u, "tie, kept half odd: rounds up to even"},
        {0x3f807fffu, 0x3f80u, "below the tie rounds down"},
        {0x3f808001u, 0x3f81u, "above the tie rounds up"},
        {0xbf818000u, 0xbf82u, "negative tie rounds away from the odd value"},
        {0x7f7f8000u, 0x7f80u, "tie above the largest finite (odd) overflows to inf"},
        {0x7f7effffu, 0x7f7fu, "just below that stays finite"},
        {0x7f800000u, 0x7f80u, "inf"},
        {0x00008000u, 0x0000u, "subnormal tie to even zero"},
        {0x00018000u, 0x0002u, "subnormal tie rounds to even"},
        {0x80000000u, 0x8000u, "-0"},
        {0x7fc00000u, 0x7fc0u, "quiet NaN unchanged"},
        {0x7f800001u, 0x7fc0u, "signalling NaN with only low payload bits: quiet bit set, not rounded to inf"},
        {0x7f80ffffu, 0x7fc0u, "NaN is truncated, not rounded (rounding would carry into the sign)"},
        {0xff810000u, 0xffc1u, "negative NaN keeps sign and payload"},
        {0x7fffffffu, 0x7fffu, "all-ones NaN stays NaN"},
    };
    for (const Case& c : cases) {
        INFO(c.why);
        CHECK(kiln::fp32_to_bf16(float_of(c.f32)) == c.bf16);
    }
}

TEST_CASE("bf16: every pattern survives a round trip through float", "[half]") {
    for (uint32_t i = 0; i <= 0xffffu; ++i) {
        const auto h = static_cast<uint16_t>(i);
        const float f = kiln::bf16_to_fp32(h);
        REQUIRE(bits_of(f) == i << 16);  // bf16 is the upper half of a float
        const uint16_t back = kiln::fp32_to_bf16(f);
        if (is_bf16_nan(h)) {
            REQUIRE(std::isnan(f));
            REQUIRE(back == (h | 0x0040u));  // quiet bit forced
        } else {
            REQUIRE(back == h);
        }
    }
}

TEST_CASE("bf16: rounding matches nearest-even computed in double", "[half]") {
    // An independent statement of the rule: among the two bf16 neighbours of a
    // finite float, pick the nearer, the even one on a tie.
    for (uint64_t u = 0; u < 0x7f7f0000u; u += 4099) {
        const float f = float_of(static_cast<uint32_t>(u));
        const uint32_t down = static_cast<uint32_t>(u) & 0xffff0000u;
        const double lo = float_of(down);
        const double hi = float_of(down + 0x10000u);
        const double x = f;
        uint32_t pick = (x - lo < hi - x) ? down : (x - lo > hi - x) ? down + 0x10000u
                                                 : ((down >> 16) & 1u) ? down + 0x10000u : down;
        REQUIRE(kiln::fp32_to_bf16(f) == (pick >> 16));
        REQUIRE(kiln::fp32_to_bf16(-f) == ((pick >> 16) | 0x8000u));
    }
}

// The row kernel of engine/kernels/convert.h (F16C in 8-wide steps plus a
// scalar tail) against the scalar conversion above, bit for bit, on float rows
// holding f16 values, ties, subnormals, overflow, infinities and NaNs, at
// lengths that leave every tail size.
TEST_CASE("fp16 rows: the row kernel gives the scalar conversion's bits", "[half]") {
    std::vector<float> floats;
    for (uint32_t h = 0; h < 0x7c00u; h += 7) {  // f16 values, and the ties halfway to the next one
        const float lo = kiln::fp16_to_fp32(static_cast<uint16_t>(h));
        const float hi = kiln::fp16_to_fp32(static_cast<uint16_t>(h + 1));
        floats.insert(floats.end(), {lo, -lo, (lo + hi) * 0.5f, -(lo + hi) * 0.5f});
    }
    floats.insert(floats.end(), {65504.0f, 65520.0f, 1e6f, -1e6f, 1e-8f, -3e-5f,
                                 std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(), float_of(0x7f800001u), float_of(0xffc12345u)});
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, static_cast<int64_t>(floats.size())}) {
        std::vector<uint16_t> narrowed(static_cast<size_t>(n) + 1, 0xabcd);
        kiln::kernels::fp32_to_fp16_row(floats.data(), narrowed.data(), n);
        for (int64_t i = 0; i < n; ++i) REQUIRE(narrowed[i] == kiln::fp32_to_fp16(floats[i]));
        REQUIRE(narrowed[static_cast<size_t>(n)] == 0xabcd);  // nothing past n
    }
}
