#include "support/torch_training.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::test {

namespace {

const float* floats(const GgufTensor& t) { return reinterpret_cast<const float*>(t.data.data()); }

}  // namespace

double require_gradients_match(const GgufFile& fixture, const train::ParamModel& model,
                               const std::vector<float>& gradients, double floor) {
    double worst = 0.0;
    for (const train::ParamTensor& t : model.tensors()) {
        const float* expected = floats(fixture.get_tensor("grad." + t.name));
        const float* got = gradients.data() + t.segment.offset;
        double scale = 0.0;
        for (size_t i = 0; i < t.segment.count; ++i) scale = std::max(scale, std::abs(double(expected[i])));
        for (size_t i = 0; i < t.segment.count; ++i) {
            const double err = std::abs(double(got[i]) - expected[i]) / std::max(std::abs(double(expected[i])), floor * scale);
            worst = std::max(worst, err);
            INFO(t.name << " element " << i << ": " << got[i] << " vs torch " << expected[i]);
            // float32 against float64: 1e-4 held in Release builds, but the
            // ASan build (RelWithDebInfo, other contractions) measured 1.01e-4
            // on one llama attn_k gradient element (2026-11-25); 2e-4 until the
            // bound is derived from the rope backward's rounding.
            REQUIRE(err <= 2e-4);
        }
    }
    return worst;
}

std::pair<size_t, size_t> require_adam_steps_match(const GgufFile& fixture, train::ParamModel& model) {
    size_t skipped = 0, total = 0;
    for (const train::ParamTensor& t : model.tensors()) {
        const float* expected = floats(fixture.get_tensor("adam3." + t.name));
        const float* grad = floats(fixture.get_tensor("grad." + t.name));
        const float* got = model.tensor(t.name);
        float largest = 0;
        for (size_t i = 0; i < t.segment.count; ++i) largest = std::max(largest, std::abs(grad[i]));
        for (size_t i = 0; i < t.segment.count; ++i, ++total) {
            if (std::abs(grad[i]) < 1e-4f * largest) {
                ++skipped;
                continue;
            }
            INFO(t.name << " element " << i);
            REQUIRE(got[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-5));
        }
    }
    return {skipped, total};
}

}  // namespace kiln::test
