// kiln-convert: turns checkpoints into GGUF files and inspects them.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "convert/inspect.h"
#include "engine/core/error.h"

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

struct UsageError {
    std::string message;
};

int run(const std::vector<std::string_view>& args) {
    if (args.empty()) throw UsageError{"expected a command (try --help)"};
    if (args[0] == "-h" || args[0] == "--help") {
        fmt::print("{}", kUsage);
        return 0;
    }
    if (args[0] == "inspect") {
        if (args.size() == 2 && (args[1] == "-h" || args[1] == "--help")) {
            fmt::print("{}", kUsage);
            return 0;
        }
        if (args.size() != 2) throw UsageError{"inspect takes exactly one FILE"};
        kiln::convert::inspect(std::filesystem::path(args[1]), stdout);
        return 0;
    }
    throw UsageError{fmt::format("unknown command '{}' (try --help)", args[0])};
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    try {
        return run(args);
    } catch (const UsageError& e) {
        fmt::print(stderr, "kiln-convert: {}\n", e.message);
        return 2;
    } catch (const kiln::Error& e) {
        fmt::print(stderr, "kiln-convert: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "kiln-convert: unexpected error: {}\n", e.what());
        return 1;
    }
}
