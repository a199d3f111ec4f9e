// CPU feature detection for the kernel targets: CPUID and XGETBV on x86-64
// (the instruction set and whether the OS saves the wide registers), the
// auxiliary vector on Linux/aarch64, sysctl on Apple silicon.
#include "engine/kernels/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace kiln::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)

constexpr bool bit(unsigned word, int b) noexcept { return (word >> b) & 1u; }

// XCR0: which register states the OS saves on a context switch. Read with the
// raw instruction, since the _xgetbv intrinsic needs the XSAVE target flag.
uint64_t xcr0() noexcept {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() noexcept {
    CpuFeatures f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
    const unsigned ecx1 = c;
    const bool osxsave = bit(ecx1, 27);
    const uint64_t xcr = osxsave ? xcr0() : 0;
    const bool ymm_state = (xcr & 0x6) == 0x6;         // SSE and AVX state
    const bool zmm_state = (xcr & 0xE6) == 0xE6;       // and opmask, ZMM0-15 upper halves, ZMM16-31
    unsigned ebx7 = 0, ecx7 = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) {
        ebx7 = b;
        ecx7 = c;
    }
    unsigned ecx_ext = 0;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d) != 0) ecx_ext = c;

    f.x86_64_v3 = ymm_state && bit(ecx1, 12) /*FMA*/ && bit(ecx1, 22) /*MOVBE*/ && bit(ecx1, 28) /*AVX*/ &&
                  bit(ecx1, 29) /*F16C*/ && bit(ebx7, 3) /*BMI1*/ && bit(ebx7, 5) /*AVX2*/ && bit(ebx7, 8) /*BMI2*/ &&
                  bit(ecx_ext, 5) /*LZCNT*/;
    f.x86_64_v4 = f.x86_64_v3 && zmm_state && bit(ebx7, 16) /*AVX512F*/ && bit(ebx7, 17) /*DQ*/ &&
                  bit(ebx7, 28) /*CD*/ && bit(ebx7, 30) /*BW*/ && bit(ebx7, 31) /*VL*/;
    f.avx512_vnni = f.x86_64_v4 && bit(ecx7, 11);
    return f;
}

#elif defined(__aarch64__) && defined(__linux__)

CpuFeatures detect() noexcept {
    CpuFeatures f;
    // The bit numbers of <asm/hwcap.h>, spelled out so older headers build.
    const unsigned long hwcap = getauxval(AT_HWCAP);
    const unsigned long hwcap2 = getauxval(AT_HWCAP2);
    f.arm_dotprod = (hwcap >> 20) & 1ul;  // HWCAP_ASIMDDP
    f.arm_i8mm = (hwcap2 >> 13) & 1ul;    // HWCAP2_I8MM
    return f;
}

#elif defined(__aarch64__) && defined(__APPLE__)

bool sysctl_flag(const char* name) noexcept {
    int value = 0;
    size_t size = sizeof(value);
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}

CpuFeatures detect() noexcept {
    CpuFeatures f;
    f.arm_dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    f.arm_i8mm = sysctl_flag("hw.optional.arm.FEAT_I8MM");
    return f;
}

#else

CpuFeatures detect() noexcept { return {}; }  // only the baseline target is offered

#endif

}  // namespace

const CpuFeatures& cpu_features() noexcept {
    static const CpuFeatures features = detect();
    return features;
}

}  // namespace kiln::kernels
