// Dropout's row kernel (engine/kernels/dropout.h) against its scalar twin, on
// odd row lengths and row offsets, and its mask against the shared hash.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "engine/kernels/dropout.h"

using namespace kiln;

TEST_CASE("dropout: the fast row kernel equals the scalar twin and the hash's mask", "[kernels][dropout]") {
    const int32_t seed[2] = {12345, -7};
    const uint64_t key = kernels::dropout::key(seed, 3, kernels::dropout::kElementDomain);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t n : {1, 7, 33, 100, 1000})
        for (uint64_t first : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 40})
            for (float p : {0.1f, 0.5f}) {
                INFO("n = " << n << " first " << first << " p " << p);
                std::vector<float> x(static_cast<size_t>(n)), fast(x.size()), ref(x.size());
                for (float& v : x) v = normal(rng);
                kernels::dropout::apply(x.data(), fast.data(), n, key, first, p);
                kernels::ref::dropout::apply(x.data(), ref.data(), n, key, first, p);
                for (int64_t i = 0; i < n; ++i) {
                    const bool keep = kernels::dropout::uniform(key, first + static_cast<uint64_t>(i)) >= p;
                    REQUIRE(fast[static_cast<size_t>(i)] == ref[static_cast<size_t>(i)]);  // -0 == +0
                    REQUIRE(ref[static_cast<size_t>(i)] == (keep ? x[static_cast<size_t>(i)] / (1.0f - p) : 0.0f));
                }
            }
}

TEST_CASE("dropout: the hash keeps about 1 - p of the elements, with keys apart per domain", "[kernels][dropout]") {
    const int32_t seed[2] = {1, 2};
    const uint64_t element = kernels::dropout::key(seed, 0, kernels::dropout::kElementDomain);
    const uint64_t attention = kernels::dropout::key(seed, 0, kernels::dropout::kAttentionDomain);
    CHECK(element != attention);
    int kept = 0;
    const int n = 100000;
    for (int i = 0; i < n; ++i) kept += kernels::dropout::uniform(element, static_cast<uint64_t>(i)) >= 0.25f;
    CHECK(kept == Approx(0.75 * n).epsilon(0.01));
}
