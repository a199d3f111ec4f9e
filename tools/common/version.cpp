#include "tools/common/version.h"

#include <fmt/format.h>

#include <cstdio>
#include <span>

#include "engine/kernels/kernel_targets.h"
#include "engine/kernels/matmul.h"
#include "kiln_build_info.h"

namespace kiln::cli {

std::string_view build_commit() noexcept { return KILN_BUILD_COMMIT; }

std::string version_text(std::string_view tool) {
    const auto list = [](std::span<const std::string_view> names) {
        std::string out;
        for (std::string_view name : names) out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
        return out;
    };
    return fmt::format(
        "{} {} (commit {})\n"
        "build: {}, {}\n"
        "kernel targets: {} (runnable on this CPU; built in: {}); in use: {} (matmul {})\n",
        tool, KILN_BUILD_VERSION, KILN_BUILD_COMMIT, KILN_BUILD_TYPE, KILN_BUILD_COMPILER,
        list(kernels::available_kernel_targets()), list(kernels::built_kernel_targets()),
        kernels::active_kernel_target(), kernels::active_matmul_kernels().name);
}

void print_version(std::string_view tool) { std::fputs(version_text(tool).c_str(), stdout); }

}  // namespace kiln::cli
