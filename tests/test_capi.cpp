// kiln's C API (include/kiln.h) from C and from Python: the C driver
// (tests/capi/capi_driver.c) and examples/python_ctypes.py generate greedily,
// and must print exactly what the kiln tool prints for the same command; the
// driver's own checks cover batched slots, chat templates and error paths.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/run_tool.h"
#include "support/sanitized_library.h"

using namespace kiln;
using test::run_command;
using test::shell_quote;

namespace {

std::string model_path() { return (test::shared_models_dir() / "stories260K.gguf").string(); }

std::string kiln_greedy(const std::string& prompt, int n) {
    const test::ToolRun run =
        test::run_tool("kiln", fmt::format("-m {} -p {} -n {} --temp 0", shell_quote(model_path()), shell_quote(prompt), n));
    INFO(run.err);
    REQUIRE(run.status == 0);
    return run.out;
}

}  // namespace

TEST_CASE("C API: greedy generation from C equals kiln --temp 0", "[capi]") {
    for (const auto& [prompt, n] : {std::pair<std::string, int>{"Once upon a time", 32}, {"The cat", 48}}) {
        const std::string expected = kiln_greedy(prompt, n);
        const test::ToolRun run = run_command(fmt::format("{} generate {} {} {}", test::program_command(KILN_CAPI_DRIVER),
                                                          shell_quote(model_path()), shell_quote(prompt), n));
        INFO(run.err);
        REQUIRE(run.status == 0);
        CHECK(run.out == expected);
        CHECK(run.out.size() > prompt.size() + 20);  // it generated something
    }
}

TEST_CASE("C API: two slots decoded in one batch, chat templates and error paths, from C", "[capi]") {
    const test::ToolRun run =
        run_command(fmt::format("{} checks {}", test::program_command(KILN_CAPI_DRIVER), shell_quote(model_path())));
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.out == "ok\n");
}

TEST_CASE("C API: a missing model is one error line from the C driver", "[capi]") {
    const test::ToolRun run = run_command(fmt::format("{} generate /nonexistent.gguf Hi 4", test::program_command(KILN_CAPI_DRIVER)));
    CHECK(run.status == 1);
    CHECK(run.err.find("/nonexistent.gguf") != std::string::npos);
    CHECK(run.err.find('\n') == run.err.size() - 1);
}

TEST_CASE("C API: the Python ctypes example generates what kiln --temp 0 does", "[capi][python]") {
    if (test::skipped_under_sanitizers()) return;
    const std::string expected = kiln_greedy("Once upon a time", 32);
    const test::ToolRun run = run_command(fmt::format(
        "{} {} --lib {} -m {} -p 'Once upon a time' -n 32", shell_quote(KILN_PYTHON),
        shell_quote((test::source_dir() / "examples" / "python_ctypes.py").string()), shell_quote(KILN_CAPI_LIBRARY),
        shell_quote(model_path())));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out == expected);
}

TEST_CASE("C API: the Python example reports a missing model as kiln's error line", "[capi][python]") {
    if (test::skipped_under_sanitizers()) return;
    const test::ToolRun run = run_command(fmt::format("{} {} --lib {} -m /nonexistent.gguf", shell_quote(KILN_PYTHON),
                                                      shell_quote((test::source_dir() / "examples" / "python_ctypes.py").string()),
                                                      shell_quote(KILN_CAPI_LIBRARY)));
    CHECK(run.status == 1);
    CHECK(run.err.find("/nonexistent.gguf") != std::string::npos);
}
