#pragma once
// `kiln-convert inspect FILE`: what a GGUF file holds, for people.
#include <cstdio>
#include <filesystem>

namespace kiln::convert {

// Prints metadata, the tensor table and a one-line summary to `out`.
// Throws kiln::Error when the file cannot be read.
void inspect(const std::filesystem::path& path, std::FILE* out);

}  // namespace kiln::convert
