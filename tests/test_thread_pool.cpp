// The persistent thread pool: every thread runs once per run(), barriers order
// memory, runs can follow each other quickly, errors come back to the caller.
#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/runtime/thread_pool.h"

using kiln::ThreadPool;

TEST_CASE("run calls every thread exactly once with its index", "[thread_pool]") {
    for (int n : {1, 2, 3, 5}) {
        ThreadPool pool(n);
        REQUIRE(pool.size() == n);
        for (int round = 0; round < 200; ++round) {
            std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
            std::atomic<int> bad_nth{0};
            pool.run([&](int ith, int nth) {
                calls[static_cast<size_t>(ith)].fetch_add(1);
                if (nth != n) bad_nth.fetch_add(1);
            });
            for (auto& c : calls) REQUIRE(c.load() == 1);
            REQUIRE(bad_nth.load() == 0);
        }
    }
}

TEST_CASE("a run with fewer active threads calls only those, and its barriers wait for them alone", "[thread_pool]") {
    ThreadPool pool(4);
    // Counts that change every run: workers that sat a run out must never
    // take part in the next one twice or with the wrong count.
    const int counts[] = {4, 1, 3, 2, 4, 2, 1, 1, 3, 4, 2};
    for (int round = 0; round < 300; ++round) {
        const int active = counts[round % std::size(counts)];
        pool.set_active(active);
        REQUIRE(pool.active() == active);
        std::vector<std::atomic<int>> calls(4);
        std::vector<int> slots(4, -1);
        std::atomic<int> bad{0};
        pool.run([&](int ith, int nth) {
            calls[static_cast<size_t>(ith)].fetch_add(1);
            if (nth != active) bad.fetch_add(1);
            slots[static_cast<size_t>(ith)] = round;
            pool.barrier();
            for (int j = 0; j < nth; ++j)
                if (slots[static_cast<size_t>(j)] != round) bad.fetch_add(1);
            pool.barrier();
        });
        for (int i = 0; i < 4; ++i) REQUIRE(calls[static_cast<size_t>(i)].load() == (i < active ? 1 : 0));
        REQUIRE(bad.load() == 0);
    }
    pool.set_active(9);
    CHECK(pool.active() == 4);
    pool.set_active(0);
    CHECK(pool.active() == 1);
}

TEST_CASE("barrier makes every thread's writes visible to all", "[thread_pool]") {
    ThreadPool pool(3);
    constexpr int kSteps = 500;
    std::vector<int> slots(3, 0);  // plain ints: only the barrier orders them
    std::atomic<int> mismatches{0};
    pool.run([&](int ith, int nth) {
        for (int step = 1; step <= kSteps; ++step) {
            slots[static_cast<size_t>(ith)] = step;
            pool.barrier();
            for (int j = 0; j < nth; ++j)
                if (slots[static_cast<size_t>(j)] != step) mismatches.fetch_add(1);
            pool.barrier();  // nobody writes the next step before all have read this one
        }
    });
    CHECK(mismatches.load() == 0);
}

TEST_CASE("a sum split in row chunks equals the single-thread sum", "[thread_pool]") {
    std::vector<double> values(100003);
    std::iota(values.begin(), values.end(), 0.0);
    std::vector<double> partial(4);
    ThreadPool pool(4);
    pool.run([&](int ith, int nth) {
        const auto [begin, end] = kiln::split_range(static_cast<int64_t>(values.size()), ith, nth);
        double s = 0;
        for (int64_t i = begin; i < end; ++i) s += values[static_cast<size_t>(i)];
        partial[static_cast<size_t>(ith)] = s;
    });
    CHECK(std::accumulate(partial.begin(), partial.end(), 0.0) == 100003.0 * 100002.0 / 2);
}

TEST_CASE("split_range covers 0..n in contiguous near-equal chunks", "[thread_pool]") {
    for (int64_t n : {0, 1, 7, 64, 1001}) {
        for (int nth : {1, 2, 3, 16}) {
            int64_t expected_begin = 0;
            for (int ith = 0; ith < nth; ++ith) {
                const auto [begin, end] = kiln::split_range(n, ith, nth);
                REQUIRE(begin == expected_begin);
                REQUIRE(end - begin >= n / nth);
                REQUIRE(end - begin <= n / nth + 1);
                expected_begin = end;
            }
            REQUIRE(expected_begin == n);
        }
    }
}

TEST_CASE("an exception on a worker reaches the caller and the pool stays usable", "[thread_pool]") {
    ThreadPool pool(2);
    CHECK_THROWS_WITH(pool.run([](int ith, int) {
        if (ith == 1) throw std::runtime_error("worker failed");
    }),
                      "worker failed");
    std::atomic<int> calls{0};
    pool.run([&](int, int) { calls.fetch_add(1); });
    CHECK(calls.load() == 2);
}

