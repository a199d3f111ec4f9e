// `cmake --install` into a fresh prefix, then a program outside kiln's tree
// (tests/capi/consumer) built against the installed files alone, once with
// find_package(kiln) and once with pkg-config, and run.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/sanitized_library.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::string q(const std::filesystem::path& p) { return shell_quote(p.string()); }

test::ToolRun run_logged(const std::string& command) {
    const test::ToolRun run = test::run_command(command);
    INFO(command << "\nstdout: " << run.out << "\nstderr: " << run.err);
    REQUIRE(run.status == 0);
    return run;
}

}  // namespace

TEST_CASE("cmake --install gives bin, lib, include, a CMake package and kiln.pc that another program builds with",
          "[install][capi]") {
    if (test::skipped_under_sanitizers()) return;
    const test::TempDir dir;
    const auto prefix = dir.path() / "prefix";
    run_logged(fmt::format("{} --install {} --prefix {}", shell_quote(KILN_CMAKE_COMMAND), q(KILN_BINARY_DIR), q(prefix)));

    for (const char* tool : {"kiln", "kiln-convert", "kiln-perplexity", "kiln-bench", "kiln-tokenize", "kiln-train",
                             "kiln-kernel-bench"})
        CHECK(std::filesystem::is_regular_file(prefix / "bin" / tool));
#if defined(__APPLE__)
    CHECK(std::filesystem::exists(prefix / "lib" / "libkiln.dylib"));
#else
    CHECK(std::filesystem::exists(prefix / "lib" / "libkiln.so"));
#endif
    CHECK(std::filesystem::is_regular_file(prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake"));
    CHECK(std::filesystem::is_regular_file(prefix / "lib" / "pkgconfig" / "kiln.pc"));
    // The public header alone: none of kiln's C++ internals.
    std::vector<std::string> headers;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(prefix / "include"))
        if (entry.is_regular_file()) headers.push_back(entry.path().filename().string());
    CHECK(headers == std::vector<std::string>{"kiln.h"});
    // The installed programs run from the prefix.
    const test::ToolRun version = run_logged(fmt::format("{} --version", q(prefix / "bin" / "kiln")));
    CHECK_THAT(version.out, Catch::StartsWith("kiln "));

    const std::string model = (test::shared_models_dir() / "stories260K.gguf").string();
    const auto consumer = test::source_dir() / "tests" / "capi" / "consumer";
    const std::string expected = "kiln 0.1.0: llama, 512 tokens\n";

    {  // find_package(kiln)
        const auto build = dir.path() / "build-cmake";
        run_logged(fmt::format("{} -S {} -B {} -DCMAKE_PREFIX_PATH={} -DCMAKE_C_COMPILER={} >/dev/null",
                               shell_quote(KILN_CMAKE_COMMAND), q(consumer), q(build), q(prefix),
                               shell_quote(KILN_C_COMPILER)));
        run_logged(fmt::format("{} --build {}", shell_quote(KILN_CMAKE_COMMAND), q(build)));
        CHECK(run_logged(fmt::format("{} {}", q(build / "consumer"), shell_quote(model))).out == expected);
    }
    {  // pkg-config kiln
        const auto exe = dir.path() / "consumer-pc";
        run_logged(fmt::format("{} {} -o {} $(PKG_CONFIG_PATH={} pkg-config --cflags --libs kiln)",
                               shell_quote(KILN_C_COMPILER), q(consumer / "consumer.c"), q(exe),
                               q(prefix / "lib" / "pkgconfig")));
        CHECK(run_logged(fmt::format("LD_LIBRARY_PATH={} {} {}", q(prefix / "lib"), q(exe), shell_quote(model))).out ==
              expected);
    }
}
