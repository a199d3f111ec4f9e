#include "support/run_tool.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdlib>

#include "support/run_command.h"
#include "support/sample_gguf.h"

namespace kiln::test {

namespace {
std::string read_text(const std::filesystem::path& p) {
    const auto bytes = read_file(p);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}
}  // namespace

std::filesystem::path tool_path(const std::string& name) {
    if (name == "kiln-convert") return KILN_CONVERT_EXE;
    if (name == "kiln-bench") return std::filesystem::path(KILN_BENCH_DIR) / name;
    return std::filesystem::path(KILN_TOOLS_DIR) / name;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

ToolRun run_tool(const std::string& name, const std::string& args) {
    return run_command(fmt::format("{} {}", shell_quote(tool_path(name).string()), args));
}

ToolRun run_command(const std::string& command_line) {
    TempDir dir;
    const std::string command = fmt::format("({}) >{} 2>{}", command_line,
                                            shell_quote((dir.path() / "out").string()),
                                            shell_quote((dir.path() / "err").string()));
    const int raw = std::system(command.c_str());
    ToolRun run;
    REQUIRE(WIFEXITED(raw));
    run.status = WEXITSTATUS(raw);
    run.out = read_text(dir.path() / "out");
    run.err = read_text(dir.path() / "err");
    return run;
}

}  // namespace kiln::test
