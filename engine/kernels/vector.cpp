// xsimd row kernels (see vector.h); tested against the scalar twins in
// vector_ref.cpp. Built for the best instruction set the compiler flags allow
// (xsimd's default arch: AVX-512 under -march=native on the reference machine).
//
// Accuracy choices, each measured against the double-precision twins:
//  - Sums over a row (norms, softmax) use float lanes only for short runs: four
//    batch accumulators take at most kTermsPerLane terms per lane, then the
//    block total is added into a double. The float error therefore depends on
//    the block, not on n, so long rows (8192 and more) stay within a few float
//    roundings of the exact sum.
//  - Element-wise tails (n not a multiple of the batch width) go through the
//    same batch code on a zero-padded copy, so an element's result does not
//    depend on where in the row it sits.
//  - Sigmoid-shaped gates use exp(-|z|), which never overflows, so silu and
//    gelu are finite (and correct) for inputs like +-1e4 and +-1e30.
//  - rope computes its angles in double (see rope below).
#include "engine/kernels/vector.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "engine/kernels/simd.h"

namespace kiln::kernels {

namespace {

using batch = xsimd::batch<float>;
using dbatch = xsimd::batch<double>;
constexpr int64_t W = static_cast<int64_t>(batch::size);
constexpr int64_t DW = static_cast<int64_t>(dbatch::size);
constexpr int64_t kTermsPerLane = 16;  // float terms per lane before a block is flushed into double

batch load(const float* p) noexcept { return batch::load_unaligned(p); }

// out[i] = f(x[i]) for a batch function f; the tail runs f on a padded copy.
template <class F>
void map1(const float* x, float* out, int64_t n, F f) noexcept {
    int64_t i = 0;
    for (; i + W <= n; i += W) f(load(x + i)).store_unaligned(out + i);
    if (i < n) {
        alignas(64) float buf[W] = {};
        std::memcpy(buf, x + i, static_cast<size_t>(n - i) * sizeof(float));
        f(batch::load_aligned(buf)).store_aligned(buf);
        std::memcpy(out + i, buf, static_cast<size_t>(n - i) * sizeof(float));
    }
}

// out[i] = f(a[i], b[i]); same tail treatment as map1.
template <class F>
void map2(const float* a, const float* b, float* out, int64_t n, F f) noexcept {
    int64_t i = 0;
    for (; i + W <= n; i += W) f(load(a + i), load(b + i)).store_unaligned(out + i);
    if (i < n) {
        alignas(64) float ba[W] = {};
        alignas(64) float bb[W] = {};
        const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
        std::memcpy(ba, a + i, bytes);
        std::memcpy(bb, b + i, bytes);
        f(batch::load_aligned(ba), batch::load_aligned(bb)).store_aligned(ba);
        std::memcpy(out + i, ba, bytes);
    }
}

// Σ over the row of terms, where vec(i) gives the terms of elements [i, i+W)
// as a batch and one(i) the term of element i. Both are called exactly once
// per element, in increasing order, so they may also store results.
template <class Vec, class One>
double blocked_sum(int64_t n, Vec vec, One one) noexcept {
    constexpr int64_t kStep = 4 * W;
    constexpr int64_t kBlock = kTermsPerLane * kStep;
    double total = 0.0;
    int64_t i = 0;
    while (n - i >= kStep) {
        const int64_t end = i + std::min(kBlock, (n - i) / kStep * kStep);
        batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
        for (; i < end; i += kStep) {
            a0 += vec(i);
            a1 += vec(i + W);
            a2 += vec(i + 2 * W);
            a3 += vec(i + 3 * W);
        }
        total += static_cast<double>(xsimd::hadd((a0 + a1) + (a2 + a3)));
    }
    if (n - i >= W) {
        batch a(0.0f);
        for (; i + W <= n; i += W) a += vec(i);
        total += static_cast<double>(xsimd::hadd(a));
    }
    for (; i < n; ++i) total += static_cast<double>(one(i));
    return total;
}

// x * sigmoid(z) without overflow: e = exp(-|z|) is in (0, 1], and
// sigmoid(z) = 1 / (1 + e) for z >= 0, e / (1 + e) for z < 0. The naive
// x / (1 + exp(-z)) overflows exp for z < -88 (harmless: x / inf = -0) but
// e / (1 + e) with e = exp(+|z|) would give inf / inf = NaN.
batch times_sigmoid(batch x, batch z) noexcept {
    const batch one(1.0f);
    const batch e = xsimd::exp(-xsimd::abs(z));
    return x * (xsimd::select(z >= batch(0.0f), one, e) / (one + e));
}

// xsimd 8.1 has no horizontal max; the lanes are few.
float hmax(batch v) noexcept {
    alignas(64) float lanes[W];
    v.store_aligned(lanes);
    float m = lanes[0];
    for (int64_t l = 1; l < W; ++l) m = std::max(m, lanes[l]);
    return m;
}

// Lane permutation (0 1 2 3 ...) -> (1 0 3 2 ...): swaps the two members of
// each rope pair.
struct PairSwap {
    static constexpr unsigned get(unsigned i, unsigned) { return i ^ 1u; }
};

}  // namespace

void add(const float* a, const float* b, float* out, int64_t n) noexcept {
    map2(a, b, out, n, [](batch x, batch y) { return x + y; });
}

void mul(const float* a, const float* b, float* out, int64_t n) noexcept {
    map2(a, b, out, n, [](batch x, batch y) { return x * y; });
}

void scale(const float* x, float s, float* out, int64_t n) noexcept {
    const batch sv(s);
    map1(x, out, n, [sv](batch v) { return v * sv; });
}

void softcap(const float* x, float cap, float* out, int64_t n) noexcept {
    const batch inv(1.0f / cap), cv(cap);
    map1(x, out, n, [inv, cv](batch v) { return xsimd::tanh(v * inv) * cv; });
}

void relu(const float* x, float* out, int64_t n) noexcept {
    // select, not max(v, 0): max's result for NaN depends on the operand order
    // the instruction set uses; v < 0 is false for NaN everywhere, so NaN passes
    // through as in ref::relu (and torch.relu).
    map1(x, out, n, [](batch v) { return xsimd::select(v < batch(0.0f), batch(0.0f), v); });
}

void silu(const float* x, float* out, int64_t n) noexcept {
    map1(x, out, n, [](batch v) { return times_sigmoid(v, v); });
}

void gelu_tanh(const float* x, float* out, int64_t n) noexcept {
    // GPT-2's 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), evaluated
    // through the identity 0.5 (1 + tanh(u)) = sigmoid(2u). Same function, but
    // for x << 0 the tanh form subtracts two numbers near 1 and keeps only the
    // absolute float error (~6e-8), while the sigmoid form keeps its relative
    // accuracy down to where exp underflows.
    const float k1 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi));
    const float k3 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi) * 0.044715);
    map1(x, out, n, [k1, k3](batch v) {
        const batch z = v * xsimd::fma(batch(k3), v * v, batch(k1));  // 2u = v (k1 + k3 v^2)
        return times_sigmoid(v, z);
    });
}

void gelu_erf(const float* x, float* out, int64_t n) noexcept {
    // 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): erfc avoids the
    // cancellation of 1 + erf(t) for t << 0.
    const batch neg_inv_sqrt2(static_cast<float>(-1.0 / std::numbers::sqrt2));
    map1(x, out, n, [neg_inv_sqrt2](batch v) { return batch(0.5f) * v * xsimd::erfc(v * neg_inv_sqrt2); });
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept {
    map2(gate, up, out, n, [](batch g, batch u) { return times_sigmoid(g, g) * u; });
}

float dot(const float* a, const float* b, int64_t n) noexcept {
    batch acc(0.0f);
    int64_t i = 0;
    for (; i + W <= n; i += W) acc = xsimd::fma(load(a + i), load(b + i), acc);
    float s = xsimd::hadd(acc);
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    const double sum_sq = blocked_sum(
        n,
        [x](int64_t i) {
            const batch v = load(x + i);
            return v * v;
        },
        [x](int64_t i) { return x[i] * x[i]; });
    const batch inv(static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps)));
    if (weight) {
        map2(x, weight, out, n, [inv](batch v, batch w) { return v * inv * w; });
    } else {
        map1(x, out, n, [inv](batch v) { return v * inv; });
    }
}

void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    // Three passes before the output one: a rough mean, its refinement, and the
    // mean square of the deviations, formed before squaring so that a large
    // mean does not cancel the variance away (E[x^2] - E[x]^2 would).
    //
    // The mean is held as an unevaluated float sum hi + lo: x - hi is exact for
    // x near the mean, so (x - hi) - lo is the deviation to within a float
    // rounding even when |mean| >> spread. A single rounded float mean would
    // cost a row of values 3.000 +- 0.002 about 3e-5 of every normalized output.
    // The first estimate comes from float lanes and is itself only good to
    // ~ulp(mean); one more pass adds the mean of the deviations from it, which
    // are small, so their float sum is accurate relative to the spread. What is
    // left is an error of ~2^-24 std in the mean: an absolute error of a few
    // ulps of one in the normalized outputs, as in any float evaluation.
    const auto split = [](double m, float& hi, float& lo) {
        hi = static_cast<float>(m);
        lo = static_cast<float>(m - hi);
    };
    const auto mean_of_dev = [x, n](float hi, float lo) {
        const batch hv(hi), lv(lo);
        return blocked_sum(
                   n, [x, hv, lv](int64_t i) { return (load(x + i) - hv) - lv; },
                   [x, hi, lo](int64_t i) { return (x[i] - hi) - lo; }) /
               static_cast<double>(n);
    };
    float hi = 0.0f, lo = 0.0f;
    split(mean_of_dev(0.0f, 0.0f), hi, lo);
    split(static_cast<double>(hi) + lo + mean_of_dev(hi, lo), hi, lo);
    const batch hv(hi), lv(lo);
    const auto dev = [hv, lv](batch v) { return (v - hv) - lv; };
    const auto dev1 = [hi, lo](float v) { return (v - hi) - lo; };
    const double sum_sq = blocked_sum(
        n,
        [x, dev](int64_t i) {
            const batch d = dev(load(x + i));
            return d * d;
        },
        [x, dev1](int64_t i) { return dev1(x[i]) * dev1(x[i]); });
    const float inv1 = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
    const batch inv(inv1);
    const auto norm = [dev, inv](batch v) { return dev(v) * inv; };
    if (weight && bias) {
        int64_t i = 0;
        for (; i + W <= n; i += W)
            xsimd::fma(norm(load(x + i)), load(weight + i), load(bias + i)).store_unaligned(out + i);
        for (; i < n; ++i) out[i] = std::fma(dev1(x[i]) * inv1, weight[i], bias[i]);
    } else if (weight) {
        map2(x, weight, out, n, [norm](batch v, batch w) { return norm(v) * w; });
    } else if (bias) {
        map2(x, bias, out, n, [norm](batch v, batch b) { return norm(v) + b; });
    } else {
        map1(x, out, n, norm);
    }
}

void softmax(const float* x, float* out, int64_t n) noexcept {
    if (n <= 0) return;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float max = kNegInf;
    int64_t i = 0;
    if (n >= W) {
        batch m(kNegInf);
        for (; i + W <= n; i += W) m = xsimd::max(m, load(x + i));
        max = hmax(m);
    }
    for (; i < n; ++i) max = std::max(max, x[i]);
    if (max == kNegInf) {
        // All -inf (a fully masked row): zeros, as ref::softmax and attend.
        std::fill(out, out + n, 0.0f);
        return;
    }
    // exp(x - max) <= 1 never overflows; the largest term is 1, so sum >= 1.
    const batch mv(max);
    const double sum = blocked_sum(
        n,
        [x, out, mv](int64_t j) {
            const batch e = xsimd::exp(load(x + j) - mv);
            e.store_unaligned(out + j);
            return e;
        },
        [x, out, max](int64_t j) {
            // The tail uses the same batch exp as the body (lane 0 of a splat).
            out[j] = xsimd::exp(batch(x[j] - max)).get(0);
            return out[j];
        });
    scale(out, static_cast<float>(1.0 / sum), out, n);
}

void rope(float* x, const RopeSpec& s, int64_t pos, const float* freq_factors) noexcept {
    assert(s.n_rot % 2 == 0 && s.n_rot <= s.head_dim);
    // The angle pos * base^(-2i/n_rot) is formed in double: in float it would
    // carry ~pos * 6e-8 rad of error (2.4e-4 rad at pos 4096), visible in every
    // rotated value. The per-pair cos/sin table is built once per call (for all
    // heads) with double-precision batch exp and sincos, then rounded to float.
    constexpr int64_t kPairs = 128;  // pairs per table chunk (head_dim up to 256 in one chunk)
    alignas(64) double ang[kPairs];
    alignas(64) double sn[kPairs];
    alignas(64) double cs[kPairs];
    alignas(64) float cos2[2 * kPairs];
    alignas(64) float sin2[2 * kPairs];
    const int64_t half = s.n_rot / 2;
    const double log_step = -2.0 * std::log(static_cast<double>(s.freq_base)) / static_cast<double>(s.n_rot);
    const double p = static_cast<double>(pos);
    const bool scaled = freq_factors != nullptr || !s.plain();
    const YarnRange range = yarn_range(s);
    const double magnitude = rope_magnitude(s);
    const auto swap = xsimd::make_batch_constant<xsimd::batch<uint32_t>, PairSwap>();

    for (int64_t p0 = 0; p0 < half; p0 += kPairs) {
        const int64_t np = std::min(kPairs, half - p0);
        for (int64_t i = 0; i < np; ++i) ang[i] = static_cast<double>(p0 + i) * log_step;
        int64_t i = 0;
        if (!scaled) {
            for (; i + DW <= np; i += DW) {
                const auto sc = xsimd::sincos(dbatch(p) * xsimd::exp(dbatch::load_aligned(ang + i)));
                sc.first.store_aligned(sn + i);
                sc.second.store_aligned(cs + i);
            }
            for (; i < np; ++i) {
                const double theta = p * std::exp(ang[i]);
                sn[i] = std::sin(theta);
                cs[i] = std::cos(theta);
            }
        } else {
            // Scaled angles (frequency factors, linear or YaRN scaling) are
            // rare enough per call to take the scalar route.
            for (; i < np; ++i) {
                double theta = p * std::exp(ang[i]);
                if (freq_factors != nullptr) theta /= freq_factors[p0 + i];
                theta = scaled_rope_angle(s, range, p0 + i, theta);
                sn[i] = std::sin(theta) * magnitude;
                cs[i] = std::cos(theta) * magnitude;
            }
        }
        if (s.style == RopeStyle::Neox) {
            // Pairs (j, j + half): plain cos/sin tables over the chunk's pairs.
            for (int64_t j = 0; j < np; ++j) {
                cos2[j] = static_cast<float>(cs[j]);
                sin2[j] = static_cast<float>(sn[j]);
            }
            for (int64_t h = 0; h < s.n_heads; ++h) {
                float* lo = x + h * s.head_dim + p0;
                float* hi = lo + half;
                int64_t j = 0;
                for (; j + W <= np; j += W) {
                    const batch a = load(lo + j), b = load(hi + j);
                    const batch c = batch::load_aligned(cos2 + j), sv = batch::load_aligned(sin2 + j);
                    xsimd::fms(a, c, b * sv).store_unaligned(lo + j);
                    xsimd::fma(b, c, a * sv).store_unaligned(hi + j);
                }
                for (; j < np; ++j) {
                    const float a = lo[j], b = hi[j];
                    lo[j] = std::fma(a, cos2[j], -(b * sin2[j]));
                    hi[j] = std::fma(b, cos2[j], a * sin2[j]);
                }
            }
            continue;
        }
        // Interleaved tables: out = x * (c, c) + swap(x) * (-s, s) gives
        // (x0 c - x1 s, x1 c + x0 s) for each pair in one multiply-add.
        for (int64_t j = 0; j < np; ++j) {
            cos2[2 * j] = cos2[2 * j + 1] = static_cast<float>(cs[j]);
            sin2[2 * j] = -static_cast<float>(sn[j]);
            sin2[2 * j + 1] = static_cast<float>(sn[j]);
        }
        const int64_t len = 2 * np;
        for (int64_t h = 0; h < s.n_heads; ++h) {
            float* seg = x + h * s.head_dim + 2 * p0;
            int64_t j = 0;
            for (; j + W <= len; j += W) {
                const batch v = load(seg + j);
                const batch r = xsimd::fma(v, batch::load_aligned(cos2 + j),
                                           xsimd::swizzle(v, swap) * batch::load_aligned(sin2 + j));
                r.store_unaligned(seg + j);
            }
            for (; j < len; j += 2) {  // whole pairs: len and W are both even
                const float x0 = seg[j];
                const float x1 = seg[j + 1];
                seg[j] = std::fma(x0, cos2[j], x1 * sin2[j]);
                seg[j + 1] = std::fma(x1, cos2[j + 1], x0 * sin2[j + 1]);
            }
        }
    }
}

}  // namespace kiln::kernels
