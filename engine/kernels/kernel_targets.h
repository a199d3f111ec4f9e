#pragma once
// Kernel targets: the kernel sources compiled once per instruction set into one
// binary (kernel_table.h says how), and the one chosen at start-up. On x86-64
// a default build has "avx512-vnni" (x86-64-v4 with VNNI), "avx2" (x86-64-v3)
// and the baseline; an aarch64 build has "neon-i8mm" (sdot and SMMLA),
// "neon-dotprod" and "neon" (its baseline); a -DKILN_NATIVE=ON build has the
// one target "native", compiled for the build machine. Every list ends with
// "scalar": the baseline's row kernels with the plain scalar matmul reference.
// A target with the AVX-512 set is also offered as "amx" (after it: chosen
// only by KILN_KERNELS=amx, since it measured no faster yet) where the CPU and
// the operating system allow AMX tiles: the same row kernels, with prompt
// batches on the tiles (matmul_avx512_amx*.cpp).
// (The x86-64 baseline has no matmul set of its own, so there "scalar" is the
// baseline.)
//
// KILN_KERNELS=name picks a target for the process; a name this build lacks,
// or one this CPU cannot run, is an error that stops the process with one line
// on stderr: a benchmark of the wrong kernels must not look like a result.
#include <span>
#include <string>
#include <string_view>

namespace kiln::kernels {

// The targets this binary has and this CPU runs, the default first ("scalar" last;
// "amx" right after the target it extends).
std::span<const std::string_view> available_kernel_targets() noexcept;
// Every target this binary has, whether or not this CPU runs it, in the same order.
std::span<const std::string_view> built_kernel_targets() noexcept;
// The target in use (KILN_KERNELS, else the first available).
std::string_view active_kernel_target() noexcept;

namespace detail {
struct KernelTable;
// The table KILN_KERNELS=`requested` selects: the first available one for a
// null or empty name; nullptr with *error set to a one-line reason when the
// name is unknown or this CPU cannot run it. Names match case-insensitively.
const KernelTable* select_kernel_target(const char* requested, std::string* error) noexcept;
// The table in use.
const KernelTable& active_kernel_table() noexcept;
}  // namespace detail

}  // namespace kiln::kernels
