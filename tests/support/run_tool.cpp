#include "support/run_tool.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdlib>

#include "support/run_command.h"
#include "support/sample_gguf.h"

extern char** environ;  // posix_spawn passes the tests' environment on

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

bool under_emulator() noexcept {
#if defined(KILN_TEST_LAUNCHER)
    return true;
#else
    return false;
#endif
}

std::string program_command(const std::filesystem::path& program) {
#if defined(KILN_TEST_LAUNCHER)
    return std::string(KILN_TEST_LAUNCHER) + " " + shell_quote(program.string());
#else
    return shell_quote(program.string());
#endif
}

std::string tool_command(const std::string& name) { return program_command(tool_path(name)); }

ToolRun run_tool(const std::string& name, const std::string& args, const std::string& shell_before) {
    return run_command(fmt::format("{} {} {}", shell_before, tool_command(name), args));
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

ToolRun run_tool_measured(const std::string& name, const std::string& args) {
    TempDir dir;
    const std::string command = fmt::format("exec {} {} >{} 2>{}", tool_command(name), args,
                                            shell_quote((dir.path() / "out").string()),
                                            shell_quote((dir.path() / "err").string()));
    const std::string figure = (dir.path() / "peak_rss").string();
    // Through kiln-peak-rss, which forks the shell (and so the tool) from a
    // small process of its own: spawned from here, the child's ru_maxrss would
    // include this process's peak. Under an emulator the budget is not checked
    // (the emulator's memory counts), so the shell is started directly there.
#if defined(KILN_PEAK_RSS_EXE) && !defined(KILN_TEST_LAUNCHER)
    const char* argv[] = {KILN_PEAK_RSS_EXE, figure.c_str(), "/bin/sh", "-c", command.c_str(), nullptr};
#else
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
#endif
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char* const*>(argv), environ) == 0);
    int raw = 0;
    rusage usage{};
    REQUIRE(wait4(pid, &raw, 0, &usage) == pid);
    ToolRun run;
    REQUIRE(WIFEXITED(raw));
    run.status = WEXITSTATUS(raw);
    run.out = read_text(dir.path() / "out");
    run.err = read_text(dir.path() / "err");
    long max_rss = usage.ru_maxrss;
#if defined(KILN_PEAK_RSS_EXE) && !defined(KILN_TEST_LAUNCHER)
    const std::string measured = read_text(figure);
    INFO("kiln-peak-rss wrote '" << measured << "'");
    REQUIRE(!measured.empty());
    max_rss = std::stol(measured);
#endif
#if defined(__APPLE__)
    run.peak_rss_kib = max_rss / 1024;  // macOS counts bytes, Linux and the BSDs KiB
#else
    run.peak_rss_kib = max_rss;
#endif
    return run;
}

}  // namespace kiln::test
