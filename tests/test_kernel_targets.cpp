// Kernel targets (engine/kernels/kernel_targets.h): which targets a build has
// and this CPU runs, KILN_KERNELS's choice and its errors, and every runnable
// target's own table against the scalar references in one process, on odd
// sizes. (CTest also runs the [kernels] tests under KILN_KERNELS=<target> for
// each target this machine runs: tests/CMakeLists.txt.)
//
// Tolerances are those of test_kernels_vector.cpp and test_kernels_attention.cpp
// (their headers derive them): exact ops bit-exact, rms_norm 1e-6 relative,
// softmax 1e-6 |ref| + 3e-8, attention 1e-5 of Σ p |v|; the F16 rows bit-exact.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/half.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/kernel_targets.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/vector_ref.h"

namespace {

namespace k = kiln::kernels;
using k::detail::KernelTable;

constexpr int64_t kSizes[] = {1, 3, 7, 9, 15, 17, 31, 33, 65, 257, 1001};

std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> row(static_cast<size_t>(n));
    for (float& v : row) v = normal(rng);
    return row;
}

const KernelTable& table_of(std::string_view name) {
    const std::string s(name);
    const KernelTable* table = k::detail::select_kernel_target(s.c_str(), nullptr);
    REQUIRE(table != nullptr);
    return *table;
}

}  // namespace

TEST_CASE("kernel targets: the lists and the choice", "[kernels][targets]") {
    const auto available = k::available_kernel_targets();
    const auto built = k::built_kernel_targets();
    REQUIRE(!available.empty());
    CHECK(available.back() == "scalar");
    CHECK(built.back() == "scalar");
    for (size_t i = 0; i < available.size(); ++i) {
        CHECK(std::find(built.begin(), built.end(), available[i]) != built.end());
        for (size_t j = i + 1; j < available.size(); ++j) CHECK(available[i] != available[j]);
        CHECK(table_of(available[i]).name == available[i]);
    }

    std::string error;
    CHECK(k::detail::select_kernel_target(nullptr, &error) == &table_of(available.front()));
    CHECK(k::detail::select_kernel_target("", &error) == &table_of(available.front()));
    CHECK(k::detail::select_kernel_target("SCALAR", &error) == &table_of("scalar"));
    CHECK(error.empty());
    CHECK(k::detail::select_kernel_target("avx9000", &error) == nullptr);
    CHECK(error.starts_with("KILN_KERNELS=avx9000 names no kernel target of this build (it has: "));
    for (std::string_view name : built) {
        if (std::find(available.begin(), available.end(), name) != available.end()) continue;
        const std::string s(name);
        error.clear();
        CHECK(k::detail::select_kernel_target(s.c_str(), &error) == nullptr);
        CHECK(error == "KILN_KERNELS=" + s + ": this CPU cannot run that kernel target (it runs: " +
                           [&] {
                               std::string list;
                               for (std::string_view a : available) list += (list.empty() ? "" : ", ") + std::string(a);
                               return list;
                           }() + ")");
    }

    // The active target is what the environment asks for.
    const char* requested = std::getenv("KILN_KERNELS");
    CHECK(&k::detail::active_kernel_table() == k::detail::select_kernel_target(requested, nullptr));
    CHECK(k::active_kernel_target() == k::detail::active_kernel_table().name);

    // "scalar" multiplies with the scalar reference; every target's set is offered.
    CHECK(table_of("scalar").matmul_set() == &k::scalar_matmul_kernels());
    const auto sets = k::available_matmul_kernels();
    for (std::string_view name : available) {
        const k::MatmulKernels* set = table_of(name).matmul_set();
        CHECK(std::find(sets.begin(), sets.end(), set) != sets.end());
    }
}

TEST_CASE("kernel targets: every runnable target's row kernels against the references", "[kernels][targets]") {
    std::mt19937 rng(20261126);
    for (std::string_view name : k::available_kernel_targets()) {
        const KernelTable& t = table_of(name);
        INFO("target " << name);
        for (int64_t n : kSizes) {
            INFO("n = " << n);
            const auto a = random_row(rng, n), b = random_row(rng, n), w = random_row(rng, n);
            std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));

            t.add(a.data(), b.data(), got.data(), n);
            k::ref::add(a.data(), b.data(), want.data(), n);
            CHECK(got == want);
            t.mul(a.data(), b.data(), got.data(), n);
            k::ref::mul(a.data(), b.data(), want.data(), n);
            CHECK(got == want);
            t.scale(a.data(), 0.37f, got.data(), n);
            k::ref::scale(a.data(), 0.37f, want.data(), n);
            CHECK(got == want);

            t.rms_norm(a.data(), w.data(), 1e-5f, got.data(), n);
            k::ref::rms_norm(a.data(), w.data(), 1e-5f, want.data(), n);
            for (size_t i = 0; i < got.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]));

            t.softmax(a.data(), got.data(), n);
            k::ref::softmax(a.data(), want.data(), n);
            for (size_t i = 0; i < got.size(); ++i)
                CHECK(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]) + 3e-8);

            double sum_abs = 0.0;
            for (size_t i = 0; i < a.size(); ++i) sum_abs += std::fabs(static_cast<double>(a[i]) * b[i]);
            CHECK(std::fabs(t.dot(a.data(), b.data(), n) - k::ref::dot(a.data(), b.data(), n)) <=
                  1e-6 * sum_abs + 1e-30);

            std::vector<uint16_t> halves(static_cast<size_t>(n));
            t.fp32_to_fp16_row(a.data(), halves.data(), n);
            for (size_t i = 0; i < halves.size(); ++i) CHECK(halves[i] == kiln::fp32_to_fp16(a[i]));
        }

        // Attention over a cache longer than one chunk, with a window start.
        for (int64_t kv_len : {1, 5, 300, 600}) {
            INFO("kv_len = " << kv_len);
            const int64_t head_dim = 64;
            const auto q = random_row(rng, head_dim), keys = random_row(rng, kv_len * head_dim),
                       values = random_row(rng, kv_len * head_dim);
            const int64_t start = kv_len > 2 ? kv_len / 3 : 0;
            std::vector<float> got(head_dim), want(head_dim);
            std::vector<float> scratch(std::max(t.attend_block_scratch(kv_len), k::attend_block_scratch(kv_len)));
            t.attend(q.data(), keys.data(), head_dim, values.data(), head_dim, kv_len, head_dim, 0.125f, nullptr,
                     got.data(), scratch.data(), 0.0f, start);
            k::ref::attend(q.data(), keys.data(), head_dim, values.data(), head_dim, kv_len, head_dim, 0.125f, nullptr,
                           want.data(), scratch.data(), 0.0f, start);
            double bound = 0.0;
            for (int64_t j = start; j < kv_len; ++j)
                for (int64_t d = 0; d < head_dim; ++d)
                    bound = std::max(bound, std::fabs(static_cast<double>(values[static_cast<size_t>(j * head_dim + d)])));
            for (int64_t d = 0; d < head_dim; ++d) CHECK(std::fabs(got[d] - want[d]) <= 1e-5 * bound);
        }
    }
}
