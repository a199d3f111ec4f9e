#pragma once
// What `kiln -v` says about a model's load on stderr: how long it took, the
// process's peak resident memory after it, and where the weights are (the
// file mapping, copies, each copied tensor, the lock).
#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "engine/core/platform.h"
#include "engine/models/weight_placement.h"

namespace kiln::cli {

// The largest resident set so far in bytes, and where the figure comes from.
struct PeakResident {
    uint64_t bytes;
    const char* source;
};

inline std::optional<PeakResident> peak_resident() {
#if KILN_OS_LINUX
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmHWM:")) return PeakResident{std::stoull(line.substr(6)) * 1024, "VmHWM"};  // "VmHWM:   1234 kB"
#endif
    // POSIX's figure: the same high-water mark on Linux, in KiB there and on the BSDs, in bytes on macOS.
    rusage usage{};
    if (::getrusage(RUSAGE_SELF, &usage) != 0 || usage.ru_maxrss <= 0) return std::nullopt;
#if defined(__APPLE__)
    constexpr uint64_t kUnit = 1;
#else
    constexpr uint64_t kUnit = 1024;
#endif
    return PeakResident{static_cast<uint64_t>(usage.ru_maxrss) * kUnit, "ru_maxrss"};
}

inline void print_load_report(std::string_view tool, double load_seconds, const WeightResidence& r) {
    const auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
    const std::optional<PeakResident> peak = peak_resident();
    fmt::print(stderr, "{}: load {:.3f} s, peak RSS {}\n", tool, load_seconds,
               peak ? fmt::format("{:.1f} MiB ({})", mib(peak->bytes), peak->source) : std::string("unknown"));
    fmt::print(stderr, "{}: weights {}: {:.1f} MiB computed from the file mapping, {} tensors ({:.1f} MiB) copied\n",
               tool, r.placement.mmap ? "mapped" : "copied (--no-mmap)", mib(r.mapped_bytes), r.copies.size(),
               mib(r.copied_bytes));
    for (const CopiedTensor& t : r.copies)
        fmt::print(stderr, "{}: copied {} {} {} bytes\n", tool, t.name, dtype_name(t.type), t.bytes);
    if (!r.copies.empty())
        fmt::print(stderr, "{}: copied in all: {} tensors, {} bytes\n", tool, r.copies.size(), r.copied_bytes);
    if (r.placement.mlock)
        fmt::print(stderr, "{}: weights locked in RAM (--mlock): {:.1f} MiB\n", tool, mib(r.locked_bytes));
}

}  // namespace kiln::cli
