#include "engine/runtime/cpu_budget.h"

#include "engine/core/platform.h"
#include "engine/runtime/cpu_topology.h"

#if KILN_OS_LINUX
#include <sched.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln {

namespace {

namespace fs = std::filesystem;

std::optional<double> parse_positive(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
    return static_cast<double>(value);
}

int logical_cpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

#if KILN_OS_LINUX

// The CPUs of this process's affinity mask, or nothing when it cannot be read.
std::vector<int> affinity_cpus() {
    // The mask may need more than CPU_SETSIZE bits on large machines: grow until the kernel accepts it.
    for (int bits = CPU_SETSIZE; bits <= (1 << 16); bits *= 2) {
        cpu_set_t* set = CPU_ALLOC(bits);
        if (set == nullptr) return {};
        const size_t size = CPU_ALLOC_SIZE(bits);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            std::vector<int> cpus;
            for (int cpu = 0; cpu < bits; ++cpu)
                if (CPU_ISSET_S(cpu, size, set)) cpus.push_back(cpu);
            CPU_FREE(set);
            return cpus;
        }
        CPU_FREE(set);
        if (errno != EINVAL) return {};
    }
    return {};
}

std::string first_line(const fs::path& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

struct CgroupMount {
    fs::path root;        // the cgroup path the mount shows at its mount point
    fs::path mount_point;
};

bool has_option(std::string_view options, std::string_view wanted) {
    while (!options.empty()) {
        const size_t comma = options.find(',');
        if (options.substr(0, comma) == wanted) return true;
        if (comma == std::string_view::npos) break;
        options.remove_prefix(comma + 1);
    }
    return false;
}

// The cgroup v2 mount and the v1 mount of the "cpu" controller, from /proc/self/mountinfo.
std::pair<std::optional<CgroupMount>, std::optional<CgroupMount>> cgroup_mounts() {
    std::optional<CgroupMount> v2, v1_cpu;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // "id parent major:minor root mount-point options [optional fields] - fstype source super-options"
        const size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream before(line.substr(0, dash)), after(line.substr(dash + 3));
        std::string id, parent, device, root, mount_point, fstype, source, super_options;
        if (!(before >> id >> parent >> device >> root >> mount_point)) continue;
        if (!(after >> fstype >> source >> super_options)) continue;
        if (fstype == "cgroup2" && !v2) v2 = CgroupMount{root, mount_point};
        if (fstype == "cgroup" && has_option(super_options, "cpu") && !v1_cpu) v1_cpu = CgroupMount{root, mount_point};
    }
    return {v2, v1_cpu};
}

// This process's cgroup folder under `mount`: for v2 the "0::" line of
// /proc/self/cgroup, for v1 the line whose controllers include "cpu".
std::optional<fs::path> cgroup_folder(const CgroupMount& mount, bool v2) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        // "hierarchy-id:controllers:path"
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
        if (v2 ? !(line.compare(0, a, "0") == 0 && controllers.empty()) : !has_option(controllers, "cpu")) continue;
        const fs::path path = line.substr(b + 1);
        // Inside a cgroup namespace the mount's root is the process's own cgroup or above it.
        const fs::path relative = path.lexically_relative(mount.root);
        if (relative.empty() || *relative.begin() == "..") return mount.mount_point;
        return (mount.mount_point / relative).lexically_normal();
    }
    return std::nullopt;
}

// The smallest limit on `folder` and its parents up to the mount point.
template <typename ReadLimit>
std::optional<double> tightest_limit(const fs::path& folder, const fs::path& mount_point, ReadLimit read_limit) {
    std::optional<double> tightest;
    for (fs::path f = folder;; f = f.parent_path()) {
        if (const auto limit = read_limit(f)) tightest = tightest ? std::min(*tightest, *limit) : *limit;
        if (f == mount_point || f == f.parent_path() || f.native().size() <= mount_point.native().size()) break;
    }
    return tightest;
}

std::optional<double> cgroup_cpu_limit() {
    const auto [v2, v1] = cgroup_mounts();
    std::optional<double> limit;
    const auto tighten = [&](std::optional<double> l) {
        if (l) limit = limit ? std::min(*limit, *l) : *l;
    };
    if (v2)
        if (const auto folder = cgroup_folder(*v2, true))
            tighten(tightest_limit(*folder, v2->mount_point,
                                   [](const fs::path& f) { return cpu_limit_from_cpu_max(first_line(f / "cpu.max")); }));
    if (v1)
        if (const auto folder = cgroup_folder(*v1, false))
            tighten(tightest_limit(*folder, v1->mount_point, [](const fs::path& f) {
                return cpu_limit_from_cfs(first_line(f / "cpu.cfs_quota_us"), first_line(f / "cpu.cfs_period_us"));
            }));
    return limit;
}

std::vector<int> cpus_or_all() {
    std::vector<int> cpus = affinity_cpus();
    if (cpus.empty())
        for (int cpu = 0; cpu < logical_cpus(); ++cpu) cpus.push_back(cpu);
    return cpus;
}

int cap_by_quota(int cpus) {
    if (const auto limit = cgroup_cpu_limit()) cpus = std::min(cpus, static_cast<int>(std::ceil(*limit)));
    return std::max(cpus, 1);
}

int usable_cpus_here() { return cap_by_quota(static_cast<int>(cpus_or_all().size())); }

int default_threads_here() {
    const std::vector<int> cpus = cpus_or_all();
    const auto cores = performance_cores(cpus, "/sys");
    return cap_by_quota(cores ? static_cast<int>(cores->size()) : static_cast<int>(cpus.size()));
}

#else  // no affinity masks, cgroups or sysfs to read: what the system counts as a whole

int usable_cpus_here() { return logical_cpus(); }

int default_threads_here() {
#if KILN_OS_SYSCTLBYNAME
    // macOS: perflevel0 is the performance cores on Apple Silicon (absent on
    // Intel Macs); FreeBSD and DragonFly count cores in kern.smp.cores.
    for (const char* name : {"hw.perflevel0.physicalcpu", "hw.physicalcpu", "kern.smp.cores"})
        if (const auto cores = os::sysctl_integer(name); cores && *cores > 0)
            return std::min(static_cast<int>(*cores), logical_cpus());
#endif
    return logical_cpus();
}

#endif  // KILN_OS_LINUX

}  // namespace

std::optional<double> cpu_limit_from_cpu_max(std::string_view cpu_max) noexcept {
    const size_t space = cpu_max.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const auto quota = parse_positive(cpu_max.substr(0, space));
    const auto period = parse_positive(cpu_max.substr(space + 1));
    if (!quota || !period) return std::nullopt;  // "max": no limit
    return *quota / *period;
}

std::optional<double> cpu_limit_from_cfs(std::string_view quota_us, std::string_view period_us) noexcept {
    const auto quota = parse_positive(quota_us);  // -1: no limit
    const auto period = parse_positive(period_us);
    if (!quota || !period) return std::nullopt;
    return *quota / *period;
}

std::vector<int> affinity_cpu_ids() {
#if KILN_OS_LINUX
    return cpus_or_all();
#else
    return {};
#endif
}

int usable_cpus() noexcept {
    try {
        return usable_cpus_here();
    } catch (...) {  // reading /proc or /sys ran out of memory: fall back to what the C++ library says
        return logical_cpus();
    }
}

int default_thread_count() noexcept {
    try {
        return default_threads_here();
    } catch (...) {
        return 1;
    }
}

}  // namespace kiln
