#pragma once
// Whether this build uses Linux's own facilities (/proc, /sys, cgroups,
// sched_getaffinity, MADV_HUGEPAGE / MADV_DONTNEED, sigtimedwait) or only what
// POSIX, macOS and the BSDs also offer. Every Linux-only call sits behind
// `#if KILN_OS_LINUX` with a fallback that computes the same numbers and only
// knows less about the machine (default thread count, memory figures).
//
// cmake -DKILN_GENERIC_OS=ON defines KILN_GENERIC_OS, which takes the portable
// branches on Linux too: that is how they are built and tested where no macOS
// or BSD machine is at hand.
#include <cstring>
#include <optional>
#include <string>

#if defined(__linux__) && !defined(KILN_GENERIC_OS)
#define KILN_OS_LINUX 1
#else
#define KILN_OS_LINUX 0
#endif

// sysctlbyname() names CPU counts and models on macOS, FreeBSD, DragonFly and
// NetBSD (OpenBSD has only numeric sysctl MIBs: it falls back further).
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__DragonFly__) || defined(__NetBSD__)
#define KILN_OS_SYSCTLBYNAME 1
#include <sys/types.h>
#include <sys/sysctl.h>
#else
#define KILN_OS_SYSCTLBYNAME 0
#endif

namespace kiln::os {

#if KILN_OS_SYSCTLBYNAME
// An integer sysctl ("hw.physicalcpu"), or nothing when this system lacks it.
inline std::optional<long long> sysctl_integer(const char* name) {
    // Some are int, some are 64-bit: read into the wider and go by the size returned.
    long long wide = 0;
    size_t size = sizeof wide;
    if (::sysctlbyname(name, &wide, &size, nullptr, 0) != 0) return std::nullopt;
    if (size == sizeof(int)) {
        int narrow = 0;
        std::memcpy(&narrow, &wide, sizeof narrow);
        return narrow;
    }
    return size == sizeof wide ? std::optional<long long>(wide) : std::nullopt;
}

// A string sysctl ("machdep.cpu.brand_string"), or nothing when this system lacks it.
inline std::optional<std::string> sysctl_string(const char* name) {
    size_t size = 0;
    if (::sysctlbyname(name, nullptr, &size, nullptr, 0) != 0 || size == 0) return std::nullopt;
    std::string text(size, '\0');
    if (::sysctlbyname(name, text.data(), &size, nullptr, 0) != 0) return std::nullopt;
    text.resize(size);
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
}
#endif

}  // namespace kiln::os
