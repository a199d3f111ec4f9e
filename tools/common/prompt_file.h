#pragma once
// -f FILE, as the tools read it: a regular file, or standard input for "-"
// (`cat notes.txt | kiln -m model.gguf -f -`).
#include <cstdio>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "formats/io/regular_file.h"

namespace kiln::cli {

inline std::string read_prompt_file(std::string_view path) {
    if (path != "-") return read_regular_file(std::string(path));
    std::string text;
    char buffer[1 << 16];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
    if (std::ferror(stdin)) kiln::fail("prompt", "reading standard input failed");
    return text;
}

}  // namespace kiln::cli
