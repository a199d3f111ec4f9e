#pragma once
// What `kiln -v` says about a model's load on stderr: how long it took, the
// process's peak resident memory after it, and where the weights are (the
// file mapping, copies, each copied tensor, the lock).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "engine/models/weight_placement.h"

namespace kiln::cli {

// VmHWM of /proc/self/status in bytes: the largest resident set so far.
inline std::optional<uint64_t> peak_resident_bytes() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
    return std::nullopt;
}

inline void print_load_report(std::string_view tool, double load_seconds, const WeightResidence& r) {
    const auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
    const std::optional<uint64_t> peak = peak_resident_bytes();
    fmt::print(stderr, "{}: load {:.3f} s, peak RSS {}\n", tool, load_seconds,
               peak ? fmt::format("{:.1f} MiB (VmHWM)", mib(*peak)) : std::string("unknown (no /proc/self/status)"));
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
