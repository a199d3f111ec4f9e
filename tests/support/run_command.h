#pragma once
// Runs any shell command line as a user would, capturing exit status and output
// (run_tool.h's ToolRun); for programs that are not kiln's own tools.
#include <string>

#include "support/run_tool.h"

namespace kiln::test {

// command_line is quoted by the caller (shell_quote).
ToolRun run_command(const std::string& command_line);

}  // namespace kiln::test
