#pragma once
// Which of a process's CPUs are worth a thread of their own, as Linux's sysfs
// describes them: one per physical core (SMT siblings share a core's units),
// and only the performance cores where the CPU has two kinds (hybrid Intel:
// P-cores and E-cores; ARM big.LITTLE). Every barrier of a graph run waits for
// its slowest thread, so a thread on an efficiency core or on a core's second
// hardware thread slows the whole run down (llama.cpp defaults the same way).
//
// The functions take the sysfs root ("/sys") as a parameter so that tests can
// hand them a fake tree.
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln {

// A CPU list as sysfs writes it ("0-3,8,10-11\n" -> 0 1 2 3 8 10 11), or
// nothing for text that is not one (empty, a range running backwards, letters).
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// One CPU (the lowest) for each physical performance core among `cpus`, read
// from the sysfs tree at `sys_root`:
//  - CPUs that devices/system/cpu/online leaves out are dropped;
//  - CPUs with the same devices/system/cpu/cpuN/topology/{physical_package_id,
//    core_id} are one core;
//  - on hybrid Intel (devices/cpu_core/cpus and devices/cpu_atom/cpus both
//    list CPUs) only cores among cpu_core's CPUs count;
//  - otherwise, where devices/system/cpu/cpuN/cpu_capacity differs (ARM), the
//    cores whose capacity is under half the largest among `cpus` are
//    efficiency cores and do not count.
// When `cpus` holds no performance core (a process pinned to efficiency cores)
// all its cores count. A core-kind or capacity file that is missing or not a
// number leaves that filter out; nothing when a CPU's core cannot be read
// (then the caller counts logical CPUs).
std::optional<std::vector<int>> performance_cores(const std::vector<int>& cpus, const std::filesystem::path& sys_root);

}  // namespace kiln
