#include "engine/kernels/amx_support.h"

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace kiln::kernels {

namespace {

#if defined(__x86_64__)
constexpr bool bit(unsigned word, int b) noexcept { return (word >> b) & 1u; }

AmxSupport detect() noexcept {
    AmxSupport s;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0 || !bit(c, 27)) {
        s.refusal = "the CPU has no AMX";
        return s;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || !bit(d, 24) /*AMX-TILE*/) {
        s.refusal = "the CPU has no AMX";
        return s;
    }
    const bool int8 = bit(d, 25), bf16 = bit(d, 22);
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {  // XTILECFG, XTILEDATA
        s.refusal = "the operating system does not save the AMX tile state";
        return s;
    }
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>, spelled out for older headers
    constexpr long kXfeatureXtileData = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
        s.refusal = "Linux refused the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return s;
    }
#endif
    s.int8 = int8;
    s.bf16 = bf16;
    if (!int8 && !bf16) s.refusal = "the CPU has AMX tiles but neither AMX-INT8 nor AMX-BF16";
    return s;
}
#else
AmxSupport detect() noexcept {
    AmxSupport s;
    s.refusal = "AMX exists on x86-64 only";
    return s;
}
#endif

}  // namespace

const AmxSupport& amx_support() noexcept {
    static const AmxSupport support = detect();
    return support;
}

}  // namespace kiln::kernels
