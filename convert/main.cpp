// kiln-convert: turns checkpoints into GGUF files and inspects them.
#include <fmt/format.h>

#include <cstdio>
#include <string_view>
#include <vector>

#include "convert/inspect.h"
#include "tools/common/cli.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-convert <command> [arguments]

commands:
  inspect FILE     print a GGUF file's metadata, its tensors (name, type, shape,
                   bytes) and a one-line summary

options:
  -h, --help       show this help

exit status: 0 on success, 1 when a file cannot be read or is malformed,
2 on a usage error.
)";

int run(const std::vector<std::string_view>& args) {
    using kiln::cli::usage_error;
    if (args.empty()) usage_error("expected a command");
    if (args[0] == "-h" || args[0] == "--help") {
        fmt::print("{}", kUsage);
        return 0;
    }
    if (args[0] == "inspect") {
        if (args.size() == 2 && (args[1] == "-h" || args[1] == "--help")) {
            fmt::print("{}", kUsage);
            return 0;
        }
        if (args.size() != 2) usage_error("inspect takes exactly one FILE");
        kiln::convert::inspect(std::filesystem::path(args[1]), stdout);
        return 0;
    }
    usage_error("unknown command '{}'", args[0]);
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    return kiln::cli::run_tool("kiln-convert", [&] { return run(args); });
}
