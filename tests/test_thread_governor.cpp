// The thread governor's rule and what it reads: fewer threads while the
// pool's threads wait for CPUs, more when the affinity mask's CPUs sit idle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "engine/core/platform.h"
#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_governor.h"
#include "engine/runtime/thread_pool.h"

using kiln::CpuSample;
using kiln::next_thread_count;

namespace {

CpuSample sample(double wall, double waited, double idle) {
    CpuSample s;
    s.wall_seconds = wall;
    s.runqueue_wait_seconds = waited;
    s.idle_cpus = idle;
    return s;
}

}  // namespace

TEST_CASE("the governor gives up threads that wait for a CPU and takes idle CPUs back", "[thread_pool][governor]") {
    // A quiet machine: a few milliseconds of waiting in 100 ms, nothing idle.
    CHECK(next_thread_count(2, 2, sample(0.1, 0.003, 0.0)) == 2);
    // One other busy process on a 2-CPU machine: the 2 threads waited about
    // half a CPU's worth.
    CHECK(next_thread_count(2, 2, sample(0.1, 0.05, 0.0)) == 1);
    // 8 threads on 2 CPUs: about 6 CPUs' worth of waiting.
    CHECK(next_thread_count(8, 8, sample(0.1, 0.58, 0.0)) == 2);
    // Never below one thread, never above the pool.
    CHECK(next_thread_count(1, 4, sample(0.1, 0.4, 0.0)) == 1);
    CHECK(next_thread_count(2, 16, sample(0.1, 0.0, 6.0)) == 8);
    CHECK(next_thread_count(3, 4, sample(0.1, 0.0, 3.0)) == 4);
    // The other process is gone: one CPU idle, so one thread more.
    CHECK(next_thread_count(1, 2, sample(0.1, 0.0, 0.97)) == 2);
    // Half a CPU idle (a process that works half the time) is not enough.
    CHECK(next_thread_count(1, 2, sample(0.1, 0.0, 0.5)) == 1);
    // Waiting wins over idle time in the same interval (threads that lost
    // their cores while others sat idle are still late at the barriers).
    CHECK(next_thread_count(4, 4, sample(0.1, 0.1, 2.0)) == 3);
    // A zero-length interval, or a count outside the pool, changes nothing wrong.
    CHECK(next_thread_count(3, 4, sample(0.0, 1.0, 0.0)) == 3);
    CHECK(next_thread_count(9, 4, sample(0.1, 0.0, 0.0)) == 4);
}

TEST_CASE("schedstat and /proc/stat lines give the waiting and idle time", "[thread_pool][governor]") {
    CHECK(kiln::runqueue_wait_from_schedstat("1079102509 130031119 59\n") == 130031119u);
    CHECK(kiln::runqueue_wait_from_schedstat("0 2856907 1") == 2856907u);
    CHECK_FALSE(kiln::runqueue_wait_from_schedstat("").has_value());
    CHECK_FALSE(kiln::runqueue_wait_from_schedstat("12").has_value());
    CHECK_FALSE(kiln::runqueue_wait_from_schedstat("x y z").has_value());

    const char* stat =
        "cpu  9600038 1303606 872110 1507903 16669 0 12905 36309 0 0\n"
        "cpu0 4729825 656978 427862 830464 5351 0 5672 18013 0 0\n"
        "cpu1 4870213 646628 444247 677438 11318 0 7232 18295 0 0\n"
        "cpu10 1 2 3 1000 7 0 0 0 0 0\n"
        "intr 1 2 3\n";
    const std::vector<int> both{0, 1}, one{1}, ten{10}, missing{0, 2};
    CHECK(kiln::idle_ticks_from_proc_stat(stat, both) == 830464u + 5351u + 677438u + 11318u);
    CHECK(kiln::idle_ticks_from_proc_stat(stat, one) == 677438u + 11318u);
    CHECK(kiln::idle_ticks_from_proc_stat(stat, ten) == 1007u);  // cpu10 is not cpu1
    CHECK_FALSE(kiln::idle_ticks_from_proc_stat(stat, missing).has_value());
    CHECK_FALSE(kiln::idle_ticks_from_proc_stat("cpu0 1 2 3\n", std::vector<int>{0}).has_value());
}

TEST_CASE("a pool that follows free CPUs starts with the threads the CPUs can run and never leaves its bounds", "[thread_pool][governor]") {
    kiln::ThreadPool pool(3, kiln::LoadAdaptation::follow_free_cpus);
#if KILN_OS_LINUX
    CHECK(pool.active() == std::min(3, kiln::usable_cpus()));
    CHECK(pool.spins());
    kiln::ThreadPool wide(4 * kiln::usable_cpus(), kiln::LoadAdaptation::follow_free_cpus);
    CHECK(wide.active() == kiln::usable_cpus());
    CHECK(wide.spins());  // with no more threads than CPUs in a run, waiting spins again
    CHECK_FALSE(kiln::ThreadPool(4 * kiln::usable_cpus()).spins());
#else
    CHECK(pool.active() == 3);
#endif
    std::vector<int> seen;
    for (int i = 0; i < 50; ++i) {
        pool.run([&](int ith, int nth) {
            if (ith == 0) seen.push_back(nth);
        });
    }
    for (int nth : seen) CHECK((nth >= 1 && nth <= 3));
#if KILN_OS_LINUX
    // What the governor reads exists here (the CI machines run Linux).
    CHECK(kiln::ThreadGovernor(2).can_observe());
    CHECK(kiln::current_thread_id() > 0);
#endif
}
