// The registry of kernel targets this binary was built with, which of them
// this CPU runs, and the one-time choice among them (KILN_KERNELS). The build
// (targets.cmake) defines KILN_TARGET_<ID> for each target it compiled.
#include "engine/kernels/kernel_targets.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/kernel_table.h"

using kiln::kernels::detail::KernelTable;

// Each target's one global symbol (kernel_table_entry.cpp).
#define KILN_DECLARE_TARGET(id) extern "C" const KernelTable* kiln_kernels_##id() noexcept;
#if KILN_TARGET_NATIVE
KILN_DECLARE_TARGET(native)
#endif
#if KILN_TARGET_AVX512_VNNI
KILN_DECLARE_TARGET(avx512_vnni)
#endif
#if KILN_TARGET_AVX2
KILN_DECLARE_TARGET(avx2)
#endif
#if KILN_TARGET_NEON_I8MM
KILN_DECLARE_TARGET(neon_i8mm)
#endif
#if KILN_TARGET_NEON_DOTPROD
KILN_DECLARE_TARGET(neon_dotprod)
#endif
#if KILN_TARGET_BASELINE
KILN_DECLARE_TARGET(baseline)
#endif
#undef KILN_DECLARE_TARGET

namespace kiln::kernels {
namespace {

struct BuiltTarget {
    const KernelTable* (*table)() noexcept;
    bool (*cpu_runs)() noexcept;
};

bool always() noexcept { return true; }
[[maybe_unused]] bool has_v4_vnni() noexcept { return cpu_features().avx512_vnni; }
[[maybe_unused]] bool has_v3() noexcept { return cpu_features().x86_64_v3; }
[[maybe_unused]] bool has_dotprod() noexcept { return cpu_features().arm_dotprod; }
// The neon-i8mm target is compiled with +dotprod+i8mm: it needs both.
[[maybe_unused]] bool has_dotprod_i8mm() noexcept { return cpu_features().arm_dotprod && cpu_features().arm_i8mm; }

// Best first; the baseline (or the native target) last.
constexpr BuiltTarget kBuilt[] = {
#if KILN_TARGET_NATIVE
    {kiln_kernels_native, always},  // built for this machine: the user's choice
#endif
#if KILN_TARGET_AVX512_VNNI
    {kiln_kernels_avx512_vnni, has_v4_vnni},
#endif
#if KILN_TARGET_AVX2
    {kiln_kernels_avx2, has_v3},
#endif
#if KILN_TARGET_NEON_I8MM
    {kiln_kernels_neon_i8mm, has_dotprod_i8mm},
#endif
#if KILN_TARGET_NEON_DOTPROD
    {kiln_kernels_neon_dotprod, has_dotprod},
#endif
#if KILN_TARGET_BASELINE
    {kiln_kernels_baseline, always},
#endif
};
static_assert(sizeof(kBuilt) > 0, "the build defines at least the baseline kernel target");

constexpr size_t kBuiltCount = sizeof(kBuilt) / sizeof(kBuilt[0]);
constexpr size_t kMaxTargets = 2 * kBuiltCount + 1;  // each with its tile target ("amx"), and "scalar"

const MatmulKernels* scalar_set() noexcept { return &scalar_matmul_kernels(); }

struct Registry {
    std::array<const KernelTable*, kMaxTargets> available{};
    std::array<std::string_view, kMaxTargets> available_names{};
    size_t n_available = 0;
    std::array<std::string_view, kMaxTargets> built_names{};
    size_t n_built = 0;
    KernelTable scalar{};  // the baseline's row kernels with the scalar matmul reference
    // A target's row kernels with its tile matmul set ("amx"), offered before it.
    std::array<KernelTable, kBuiltCount> tile_tables{};
    size_t n_tile = 0;
};

const Registry& registry() noexcept {
    static const Registry r = [] {
        Registry out;
        const KernelTable* baseline = kBuilt[std::size(kBuilt) - 1].table();
        for (const BuiltTarget& target : kBuilt) {
            const KernelTable* table = target.table();
            // A baseline without a matmul set of its own is "scalar" (below).
            const bool is_scalar = table == baseline && table->matmul_set() == &scalar_matmul_kernels();
            if (is_scalar) continue;
            const bool runs = target.cpu_runs();
            out.built_names[out.n_built++] = table->name;
            if (runs) {
                out.available[out.n_available] = table;
                out.available_names[out.n_available++] = table->name;
            }
            // The tile target follows its base target: measured no faster yet
            // (README, "AMX tiles"), it runs only when KILN_KERNELS names it.
            if (table->tile_matmul_set != nullptr && table->tile_built()) {
                out.built_names[out.n_built++] = table->tile_target_name;
                if (runs && table->tile_matmul_set() != nullptr) {
                    KernelTable& tile = out.tile_tables[out.n_tile++];
                    tile = *table;
                    tile.name = table->tile_target_name;
                    tile.matmul_set = table->tile_matmul_set;
                    out.available[out.n_available] = &tile;
                    out.available_names[out.n_available++] = tile.name;
                }
            }
        }
        out.scalar = *baseline;
        out.scalar.name = "scalar";
        out.scalar.matmul_set = scalar_set;
        out.available[out.n_available] = &out.scalar;
        out.available_names[out.n_available++] = out.scalar.name;
        out.built_names[out.n_built++] = out.scalar.name;
        return out;
    }();
    return r;
}

bool same_name(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    for (size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

std::string joined(std::span<const std::string_view> names) {
    std::string out;
    for (std::string_view n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

}  // namespace

std::span<const std::string_view> available_kernel_targets() noexcept {
    const Registry& r = registry();
    return {r.available_names.data(), r.n_available};
}

std::span<const std::string_view> built_kernel_targets() noexcept {
    const Registry& r = registry();
    return {r.built_names.data(), r.n_built};
}

std::string_view active_kernel_target() noexcept { return detail::active_kernel_table().name; }

namespace detail {

const KernelTable* select_kernel_target(const char* requested, std::string* error) noexcept {
    const Registry& r = registry();
    if (requested == nullptr || *requested == '\0') return r.available[0];
    for (size_t i = 0; i < r.n_available; ++i)
        if (same_name(r.available_names[i], requested)) return r.available[i];
    if (error != nullptr) {
        try {
            bool built = false;
            for (std::string_view name : built_kernel_targets()) built |= same_name(name, requested);
            *error = "KILN_KERNELS=" + std::string(requested) +
                     (built ? ": this CPU cannot run that kernel target (it runs: "
                            : " names no kernel target of this build (it has: ") +
                     joined(built ? available_kernel_targets() : built_kernel_targets()) + ")";
        } catch (const std::bad_alloc&) {
            *error = "KILN_KERNELS names no usable kernel target";
        }
    }
    return nullptr;
}

const KernelTable& active_kernel_table() noexcept {
    // Chosen once: kernels are picked per process, never per call.
    static const KernelTable& active = []() -> const KernelTable& {
        std::string error;
        const KernelTable* table = select_kernel_target(std::getenv("KILN_KERNELS"), &error);
        if (table == nullptr) {
            std::fprintf(stderr, "kiln: %s\n", error.c_str());
            std::fflush(stderr);
            std::exit(EXIT_FAILURE);
        }
        return *table;
    }();
    return active;
}

}  // namespace detail
}  // namespace kiln::kernels
