#pragma once
// Private to the matmul kernels (and their tests): how the kernel sets find each
// other, the per-thread scratch memory the SIMD sets pack operands into, and the
// shared shape checks.
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/kernels/matmul.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln::kernels::detail {

// F16C as CPUID reports it (leaf 1, ECX bit 29). Asked directly because not
// every compiler's __builtin_cpu_supports knows the name (clang 14 does not).
inline bool cpu_has_f16c() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & (1u << 29)) != 0;
#else
    return false;
#endif
}

// Each returns nullptr when this kernel target was built without the set (its
// instruction-set macros were off) or this CPU cannot run it. Defined only in
// the kernel targets that compile the set (targets.cmake).
const MatmulKernels* avx512_vnni_matmul_kernels() noexcept;
const MatmulKernels* avx2_matmul_kernels() noexcept;
const MatmulKernels* neon_matmul_kernels() noexcept;  // "neon"; "neon-dotprod" with sdot; "neon-i8mm" with SMMLA too
// "amx": the avx512-vnni set with prompt batches on AMX tiles (matmul_avx512_amx.cpp);
// nullptr also where the CPU or the operating system refuses AMX (amx_support.h).
const MatmulKernels* amx_matmul_kernels() noexcept;
bool amx_matmul_built() noexcept;  // whether the target was compiled with the tile instructions

// A 64-byte aligned block of at least `bytes` bytes owned by the calling thread,
// valid until this thread's next call. Grows and never shrinks, so steady-state
// matmuls allocate nothing. nullptr when memory runs out: callers then fall back
// to the scalar set, which needs no scratch, instead of failing a noexcept kernel.
std::byte* thread_scratch(size_t bytes) noexcept;

inline constexpr size_t round_up(size_t n, size_t to) noexcept { return (n + to - 1) / to * to; }

// Calls f(a, b) for each row range [a, b) of [r0, r1) this thread computes:
// all of it without claims, else the chunks it claims (see RowClaims).
template <class F>
void for_each_claimed(int64_t r0, int64_t r1, const RowClaims* claims, F&& f) {
    if (claims == nullptr) {
        if (r0 < r1) f(r0, r1);
        return;
    }
    const int64_t chunk = claims->chunk_rows;
    const int64_t chunks = (r1 - r0 + chunk - 1) / chunk;
    for (int64_t c = claims->first; c < chunks; c = claims->next->fetch_add(1, std::memory_order_relaxed))
        f(r0 + c * chunk, std::min(r1, r0 + (c + 1) * chunk));
}

// Whether this thread has any chunk to compute (before it packs operands).
inline bool has_claimable_rows(int64_t r0, int64_t r1, const RowClaims* claims) noexcept {
    if (claims == nullptr) return r0 < r1;
    return claims->first * claims->chunk_rows < r1 - r0 ||
           claims->next->load(std::memory_order_relaxed) * claims->chunk_rows < r1 - r0;
}

// The preconditions every set's matmul shares (checked in debug builds only).
inline void assert_matmul_args([[maybe_unused]] DType type, [[maybe_unused]] int64_t k,
                               [[maybe_unused]] int64_t r0, [[maybe_unused]] int64_t r1,
                               [[maybe_unused]] int64_t n_tokens, [[maybe_unused]] int64_t out_stride,
                               [[maybe_unused]] const float* out) noexcept {
    assert(matmul_supports(type));
    assert(k >= 0 && 0 <= r0 && r0 <= r1 && n_tokens >= 0);
    assert(k % type_traits(type).block_size == 0);
    assert(out_stride >= r1 || n_tokens <= 1);
    assert(out != nullptr || r0 == r1 || n_tokens == 0);
}

}  // namespace kiln::kernels::detail
