// kiln-convert's terminal progress line: byte counts and percentages, redrawn
// in place, silent when disabled (stderr not a terminal).
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "convert/progress.h"

namespace {

std::string contents(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    return s;
}

}  // namespace

TEST_CASE("progress: bytes and percent on a terminal, nothing otherwise", "[convert]") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    {
        kiln::convert::Progress off(f, 4 << 20, false);
        off.update(1 << 20, "blk.0.attn_q.weight");
        off.status("writing");
        off.clear();
    }
    CHECK(contents(f).empty());

    kiln::convert::Progress on(f, 4 << 20, true);
    on.update(1 << 20, "[1/2] token_embd.weight");  // the first update always draws
    on.update(4 << 20, "[2/2] output.weight");      // so does the last (done == total)
    on.status("[100%] writing out.gguf");
    on.clear();
    const std::string text = contents(f);
    CHECK(text.find("\r\033[K[ 25%] 1.0 / 4.0 MiB  [1/2] token_embd.weight") != std::string::npos);
    CHECK(text.find("\r\033[K[100%] 4.0 / 4.0 MiB  [2/2] output.weight") != std::string::npos);
    CHECK(text.find("writing out.gguf") != std::string::npos);
    CHECK(text.ends_with("\r\033[K"));
    std::fclose(f);
}
