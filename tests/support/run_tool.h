#pragma once
// Runs one of kiln's programs as a user would, capturing exit status and output.
#include <filesystem>
#include <string>

namespace kiln::test {

struct ToolRun {
    int status = -1;  // exit status
    std::string out, err;
    long peak_rss_kib = 0;  // the program's largest resident set (ru_maxrss)
};

// Path of a built program: "kiln-convert", or a tool such as "kiln".
std::filesystem::path tool_path(const std::string& name);

// The shell words that start a built program: its quoted path, behind the
// emulator that runs the build's binaries when they are cross-compiled
// (KILN_TEST_LAUNCHER, e.g. qemu-aarch64; see cmake/toolchains/).
std::string program_command(const std::filesystem::path& program);
// Whether this build's binaries run behind such an emulator (a cross build):
// user-mode qemu is tens of times slower and keeps its own address space, so
// some tests bound their commands more loosely or cannot observe the kernel's
// limits.
bool under_emulator() noexcept;
// program_command(tool_path(name)).
std::string tool_command(const std::string& name);

// Runs the program with `args` (shell-quoted by the caller where needed).
// `shell_before` runs in the same shell first, e.g. "ulimit -v 400000 &&".
ToolRun run_tool(const std::string& name, const std::string& args, const std::string& shell_before = "");

// Runs a shell command line, capturing exit status and output the same way.
ToolRun run_command(const std::string& command_line);

// run_tool() that also measures the program's peak resident memory: the
// shell execs the program, so wait4's ru_maxrss is the program's own.
ToolRun run_tool_measured(const std::string& name, const std::string& args);

// Wraps a path or text in single quotes for the shell.
std::string shell_quote(const std::string& s);

}  // namespace kiln::test
