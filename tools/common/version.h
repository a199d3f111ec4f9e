#pragma once
// `--version`, the same on every kiln program: kiln's version, the git commit
// it was built from, the build type, the compiler, and the matmul kernel sets
// this binary has for this CPU with the one chosen at run time.
#include <string>
#include <string_view>

namespace kiln::cli {

// `git describe --always --dirty` of the source tree when it was built
// ("unknown" outside a git checkout).
std::string_view build_commit() noexcept;

// The text --version prints for `tool`, ending in a newline.
std::string version_text(std::string_view tool);

// Prints version_text(tool) to stdout.
void print_version(std::string_view tool);

}  // namespace kiln::cli
