// The default thread count never exceeds the CPUs the process may use, and a
// pool with more threads than those does not spin (a spinning thread would hold
// the core that the thread it waits for needs).
#include <catch2/catch.hpp>

#include "engine/core/platform.h"
#if KILN_OS_LINUX
#include <sched.h>
#endif

#include <algorithm>
#include <thread>

#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/cpu_topology.h"
#include "engine/runtime/thread_pool.h"
#include "support/child_process.h"

using namespace kiln;

TEST_CASE("cgroup v2 cpu.max lines give the CPUs they allow", "[thread_pool][cpu_budget]") {
    CHECK(cpu_limit_from_cpu_max("150000 100000") == Approx(1.5));
    CHECK(cpu_limit_from_cpu_max("200000 100000\n") == Approx(2.0));
    CHECK(cpu_limit_from_cpu_max("50000 100000") == Approx(0.5));
    CHECK_FALSE(cpu_limit_from_cpu_max("max 100000"));
    CHECK_FALSE(cpu_limit_from_cpu_max(""));
    CHECK_FALSE(cpu_limit_from_cpu_max("0 100000"));
    CHECK_FALSE(cpu_limit_from_cpu_max("garbage"));
}

TEST_CASE("cgroup v1 cfs quotas give the CPUs they allow", "[thread_pool][cpu_budget]") {
    CHECK(cpu_limit_from_cfs("300000", "100000") == Approx(3.0));
    CHECK(cpu_limit_from_cfs("25000\n", "100000\n") == Approx(0.25));
    CHECK_FALSE(cpu_limit_from_cfs("-1", "100000"));
    CHECK_FALSE(cpu_limit_from_cfs("100000", "0"));
    CHECK_FALSE(cpu_limit_from_cfs("", ""));
}

#if KILN_OS_LINUX
TEST_CASE("the default thread count stays within the affinity mask", "[thread_pool][cpu_budget]") {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
    const int allowed = CPU_COUNT(&mask);
    CHECK(usable_cpus() >= 1);
    CHECK(usable_cpus() <= allowed);
    CHECK(default_thread_count() >= 1);
    CHECK(default_thread_count() <= usable_cpus());

    // The performance cores of this machine's sysfs among the mask, within the quota.
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
    const auto cores = performance_cores(cpus, "/sys");
    const int expected = std::min(cores ? static_cast<int>(cores->size()) : allowed, usable_cpus());
    CHECK(default_thread_count() == expected);

    // As under `taskset -c <one cpu>`: one thread by default, and a pool of
    // four on that CPU sleeps instead of spinning.
    const int result = test::run_in_child([&] {
        int first = 0;
        while (!CPU_ISSET(first, &mask)) ++first;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) return 10;
        if (usable_cpus() != 1) return 1;
        if (default_thread_count() != 1) return 2;
        ThreadPool pool(4);
        if (pool.spins()) return 3;
        ThreadPool single(1);
        if (!single.spins()) return 4;
        return 0;
    });
    CHECK(result == 0);
}
#else
TEST_CASE("without Linux's affinity mask and sysfs the default is what the system counts", "[thread_pool][cpu_budget]") {
    WARN("not Linux, or built with KILN_GENERIC_OS: no affinity mask, cgroup quota or sysfs topology is read");
    const int logical = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    CHECK(usable_cpus() == logical);
    CHECK(default_thread_count() >= 1);
    CHECK(default_thread_count() <= logical);
#if !KILN_OS_SYSCTLBYNAME
    CHECK(default_thread_count() == logical);  // nothing tells cores from hardware threads
#endif
    ThreadPool single(1);
    CHECK(single.spins());
}
#endif
