#include "tools/common/version.h"

#include <fmt/format.h>

#include <cstdio>

#include "engine/kernels/matmul.h"
#include "kiln_build_info.h"

namespace kiln::cli {

std::string_view build_commit() noexcept { return KILN_BUILD_COMMIT; }

std::string version_text(std::string_view tool) {
    std::string sets;
    for (const kernels::MatmulKernels* set : kernels::available_matmul_kernels())
        sets += fmt::format("{}{}", sets.empty() ? "" : ", ", set->name);
    return fmt::format(
        "{} {} (commit {})\n"
        "build: {}, {}\n"
        "kernel sets: {} (compiled in and runnable on this CPU); in use: {}\n",
        tool, KILN_BUILD_VERSION, KILN_BUILD_COMMIT, KILN_BUILD_TYPE, KILN_BUILD_COMPILER, sets,
        kernels::active_matmul_kernels().name);
}

void print_version(std::string_view tool) { std::fputs(version_text(tool).c_str(), stdout); }

}  // namespace kiln::cli
