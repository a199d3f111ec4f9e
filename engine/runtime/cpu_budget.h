#pragma once
// How many CPUs this process may really use, so that the default thread count
// never asks for more: the CPUs of its affinity mask (taskset, a container's
// cpuset), capped by the CPU quota of its cgroup (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us, on the process's cgroup and every
// parent). Threads beyond that wait for a core the kernel will not give them,
// and every barrier waits for the slowest thread. Off Linux (or built with
// KILN_GENERIC_OS) there is no mask or quota to read: the system's CPU count.
#include <optional>
#include <string_view>
#include <vector>

namespace kiln {

// CPUs this process may run on at once (at least 1): the affinity mask's
// count, capped by the cgroup quota rounded up.
int usable_cpus() noexcept;

// Physical performance cores among the CPUs of the affinity mask (SMT siblings
// count once, efficiency cores not at all: cpu_topology.h; logical CPUs when
// the topology cannot be read), capped by usable_cpus(). Off Linux: macOS's
// hw.perflevel0.physicalcpu (else hw.physicalcpu), FreeBSD's kern.smp.cores,
// else the logical CPUs.
int default_thread_count() noexcept;

// The ids of the CPUs of the affinity mask (every CPU when it cannot be read);
// empty off Linux.
std::vector<int> affinity_cpu_ids();

// The CPUs a cgroup v2 "cpu.max" line allows ("150000 100000" -> 1.5), or
// nothing for "max ..." (no limit) or text that is not such a line.
std::optional<double> cpu_limit_from_cpu_max(std::string_view cpu_max) noexcept;

// The CPUs a cgroup v1 quota allows (quota / period), or nothing when the
// quota is -1 (no limit) or either is not a positive number.
std::optional<double> cpu_limit_from_cfs(std::string_view quota_us, std::string_view period_us) noexcept;

}  // namespace kiln
