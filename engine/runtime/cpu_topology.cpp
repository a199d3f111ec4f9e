#include "engine/runtime/cpu_topology.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>

namespace kiln {

namespace {

namespace fs = std::filesystem;

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    return text;
}

// A whole decimal integer (a leading '-' allowed: some platforms write -1 for
// an unknown package), or nothing.
std::optional<long long> parse_integer(std::string_view text) {
    text = trimmed(text);
    long long value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// The whole of a small sysfs file, or nothing when it cannot be read.
std::optional<std::string> read_file(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return std::nullopt;
    return text.str();
}

std::optional<std::vector<int>> read_cpu_list(const fs::path& path) {
    const auto text = read_file(path);
    return text ? parse_cpu_list(*text) : std::nullopt;
}

bool contains(const std::vector<int>& sorted, int cpu) { return std::binary_search(sorted.begin(), sorted.end(), cpu); }

// `cores` (one CPU each) kept where `keep` says so, unless it keeps none.
template <typename Keep>
std::vector<int> keep_unless_none(const std::vector<int>& cores, Keep keep) {
    std::vector<int> kept;
    std::copy_if(cores.begin(), cores.end(), std::back_inserter(kept), keep);
    return kept.empty() ? cores : kept;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
    text = trimmed(text);
    if (text.empty()) return std::nullopt;
    std::vector<int> cpus;
    constexpr int kMostCpus = 1 << 16;  // far above any machine: a bigger number is garbage, not a list to expand
    while (true) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        const size_t dash = item.find('-');
        const auto first = parse_integer(item.substr(0, dash));
        const auto last = dash == std::string_view::npos ? first : parse_integer(item.substr(dash + 1));
        if (!first || !last || *first < 0 || *last < *first || *last >= kMostCpus) return std::nullopt;
        for (long long cpu = *first; cpu <= *last; ++cpu) cpus.push_back(static_cast<int>(cpu));
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::optional<std::vector<int>> performance_cores(const std::vector<int>& cpus_given, const fs::path& sys_root) {
    const fs::path cpu_dir = sys_root / "devices/system/cpu";
    std::vector<int> cpus = cpus_given;
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    if (const auto online = read_cpu_list(cpu_dir / "online")) {
        std::vector<int> on;
        std::copy_if(cpus.begin(), cpus.end(), std::back_inserter(on), [&](int cpu) { return contains(*online, cpu); });
        if (!on.empty()) cpus = std::move(on);  // none online: the list is wrong, not the CPUs
    }
    if (cpus.empty()) return std::nullopt;

    // (package, core) -> the lowest CPU on that core; `cpus` is sorted, so the first one seen.
    std::map<std::pair<long long, long long>, int> core_of;
    for (int cpu : cpus) {
        const fs::path topology = cpu_dir / ("cpu" + std::to_string(cpu)) / "topology";
        const auto package_text = read_file(topology / "physical_package_id");
        const auto core_text = read_file(topology / "core_id");
        const auto package = package_text ? parse_integer(*package_text) : std::nullopt;
        const auto core = core_text ? parse_integer(*core_text) : std::nullopt;
        if (!package || !core) return std::nullopt;
        core_of.try_emplace({*package, *core}, cpu);
    }
    std::vector<int> cores;
    for (const auto& [key, cpu] : core_of) cores.push_back(cpu);
    std::sort(cores.begin(), cores.end());

    // Hybrid Intel: the kernel registers one PMU per core kind, each with its CPU list.
    // The core's lowest CPU stands for it: SMT siblings are always of one kind.
    const auto p_cpus = read_cpu_list(sys_root / "devices/cpu_core/cpus");
    const auto e_cpus = read_cpu_list(sys_root / "devices/cpu_atom/cpus");
    if (p_cpus && e_cpus) return keep_unless_none(cores, [&](int cpu) { return contains(*p_cpus, cpu); });

    // ARM big.LITTLE / DynamIQ: capacity relative to the fastest core (1024).
    std::map<int, long long> capacity;
    for (int cpu : cores) {
        const auto text = read_file(cpu_dir / ("cpu" + std::to_string(cpu)) / "cpu_capacity");
        const auto value = text ? parse_integer(*text) : std::nullopt;
        if (!value || *value <= 0) return cores;  // no capacities, or not numbers: every core counts
        capacity[cpu] = *value;
    }
    long long largest = 0;
    for (const auto& [cpu, c] : capacity) largest = std::max(largest, c);
    return keep_unless_none(cores, [&](int cpu) { return 2 * capacity[cpu] >= largest; });
}

}  // namespace kiln
