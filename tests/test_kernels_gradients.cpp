// The xsimd gradient kernels (engine/kernels/gradients.h) against their scalar
// twins, on odd row lengths: 1 (tail only), 7 and 33 (a tail after whole
// batches), 100 and 1000 (several batches).
//
// Tolerances, fast vs ref (the ref evaluates in double and rounds once):
//  - relu_grad: bit-exact (a select).
//  - gelu_tanh_grad, gelu_erf_grad, silu_grad: |d| <= 1e-6 |ref| + 1e-6 |grad|, a few
//    float ulps of exp/erfc and of the roundings between them (as vector's
//    activations); the absolute part covers derivatives that cancel to ~0.
//  - layer_norm_grad, rms_norm_grad, softmax_grad, cross_entropy_grad: reductions in float
//    lanes, then a difference that can cancel: |d| <= 1e-5 of the row's
//    largest |ref| (for layer_norm, of its largest term rstd |grad weight|).
//  - cross_entropy: |d| <= 1e-6 (1 + |ref|), a float log-sum-exp's roundings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/gradients.h"

using namespace kiln;

namespace {

const int64_t kSizes[] = {1, 7, 33, 100, 1000};

std::vector<float> normal_floats(int64_t n, float sd, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
}

float max_abs(const std::vector<float>& v) {
    float m = 0.0f;
    for (float x : v) m = std::max(m, std::abs(x));
    return m;
}

using ElementGrad = void (*)(const float*, const float*, float*, int64_t) noexcept;

void check_element_grad(ElementGrad fast, ElementGrad ref, double rel, double abs_of_grad) {
    for (int64_t n : kSizes) {
        INFO("n = " << n);
        const auto x = normal_floats(n, 3.0f, 1), g = normal_floats(n, 1.0f, 2);
        std::vector<float> want(x.size()), got(x.size());
        ref(x.data(), g.data(), want.data(), n);
        fast(x.data(), g.data(), got.data(), n);
        for (size_t i = 0; i < x.size(); ++i) {
            INFO("x = " << x[i] << " grad = " << g[i]);
            if (rel == 0.0) REQUIRE(got[i] == want[i]);
            else REQUIRE(std::abs(got[i] - want[i]) <= rel * std::abs(want[i]) + abs_of_grad * std::abs(g[i]));
        }
    }
}

void require_close_to_row(const std::vector<float>& got, const std::vector<float>& want, double scale) {
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("i = " << i << " got " << got[i] << " want " << want[i]);
        REQUIRE(std::abs(got[i] - want[i]) <= 1e-5 * scale);
    }
}

}  // namespace

TEST_CASE("gradients: relu_grad is bit-exact", "[kernels][gradients]") {
    check_element_grad(kernels::relu_grad, kernels::ref::relu_grad, 0.0, 0.0);
}

TEST_CASE("gradients: gelu_tanh_grad and gelu_erf_grad within tolerance of the reference", "[kernels][gradients]") {
    check_element_grad(kernels::gelu_tanh_grad, kernels::ref::gelu_tanh_grad, 1e-6, 1e-6);
    check_element_grad(kernels::gelu_erf_grad, kernels::ref::gelu_erf_grad, 1e-6, 1e-6);
}

TEST_CASE("gradients: silu_grad within tolerance of the reference", "[kernels][gradients]") {
    check_element_grad(kernels::silu_grad, kernels::ref::silu_grad, 1e-6, 1e-6);
}

TEST_CASE("gradients: rms_norm_grad with and without weights", "[kernels][gradients]") {
    for (int64_t n : kSizes) {
        INFO("n = " << n);
        const auto x = normal_floats(n, 2.0f, 13), w = normal_floats(n, 1.0f, 14), g = normal_floats(n, 1.0f, 15);
        for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
            INFO("weights " << (weight != nullptr));
            std::vector<float> want(x.size()), got(x.size());
            kernels::ref::rms_norm_grad(x.data(), weight, g.data(), 1e-5f, want.data(), n);
            kernels::rms_norm_grad(x.data(), weight, g.data(), 1e-5f, got.data(), n);
            // The two terms r d and x r^3 mean(d x) can cancel: bound by the larger.
            double squares = 0.0;
            for (float v : x) squares += static_cast<double>(v) * v / static_cast<double>(n);
            const double r = 1.0 / std::sqrt(squares + 1e-5);
            double largest_term = 0.0;
            for (size_t i = 0; i < g.size(); ++i)
                largest_term = std::max(largest_term, r * std::abs(g[i] * (weight ? weight[i] : 1.0f)));
            require_close_to_row(got, want, std::max<double>(max_abs(want), largest_term));
        }
    }
}

TEST_CASE("gradients: layer_norm_grad with and without weights", "[kernels][gradients]") {
    for (int64_t n : kSizes) {
        INFO("n = " << n);
        const auto x = normal_floats(n, 2.0f, 3), w = normal_floats(n, 1.0f, 4), g = normal_floats(n, 1.0f, 5);
        for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
            INFO("weights " << (weight != nullptr));
            std::vector<float> want(x.size()), got(x.size());
            kernels::ref::layer_norm_grad(x.data(), weight, g.data(), 1e-5f, want.data(), n);
            kernels::layer_norm_grad(x.data(), weight, g.data(), 1e-5f, got.data(), n);
            // The terms that cancel are rstd * grad * weight: with one element (var = 0, rstd = 1/sqrt(eps))
            // they are large while the exact dx is 0.
            double mean = 0.0, var = 0.0;
            for (float v : x) mean += v / static_cast<double>(n);
            for (float v : x) var += (v - mean) * (v - mean) / static_cast<double>(n);
            const double rstd = 1.0 / std::sqrt(var + 1e-5);
            double largest_term = 0.0;
            for (size_t i = 0; i < g.size(); ++i)
                largest_term = std::max(largest_term, rstd * std::abs(g[i] * (weight ? weight[i] : 1.0f)));
            require_close_to_row(got, want, std::max<double>(max_abs(want), largest_term));
        }
    }
}

TEST_CASE("gradients: softmax_grad", "[kernels][gradients]") {
    for (int64_t n : kSizes) {
        INFO("n = " << n);
        auto y = normal_floats(n, 1.0f, 6);
        double total = 0.0;
        for (float& v : y) total += v = std::exp(v);
        for (float& v : y) v = static_cast<float>(v / total);
        const auto g = normal_floats(n, 1.0f, 7);
        std::vector<float> want(y.size()), got(y.size());
        kernels::ref::softmax_grad(y.data(), g.data(), want.data(), n);
        kernels::softmax_grad(y.data(), g.data(), got.data(), n);
        require_close_to_row(got, want, max_abs(want));
    }
}

TEST_CASE("gradients: cross_entropy and its gradient, target first, middle and last", "[kernels][gradients]") {
    for (int64_t n : kSizes) {
        const auto x = normal_floats(n, 4.0f, 8);
        for (int64_t t : {int64_t{0}, n / 2, n - 1}) {
            INFO("n = " << n << " target " << t);
            const auto target = static_cast<int32_t>(t);
            const float want_loss = kernels::ref::cross_entropy(x.data(), n, target);
            REQUIRE(std::abs(kernels::cross_entropy(x.data(), n, target) - want_loss) <= 1e-6 * (1 + std::abs(want_loss)));
            std::vector<float> want(x.size()), got(x.size());
            kernels::ref::cross_entropy_grad(x.data(), n, target, 0.75f, want.data());
            kernels::cross_entropy_grad(x.data(), n, target, 0.75f, got.data());
            require_close_to_row(got, want, max_abs(want));
        }
    }
}
