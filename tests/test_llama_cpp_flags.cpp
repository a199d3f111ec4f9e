// llama-cli's flags in kiln with llama.cpp's meaning: escapes (-e, on by
// default), -f - (standard input), -b/-ub (the prompt in pieces: the same
// text), -n -2 (until the context is full), and kiln-perplexity's default -c
// fitted to the model.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "tools/common/escapes.h"

using kiln::cli::process_escapes;
using kiln::test::shell_quote;

namespace {

std::string stories() { return shell_quote((kiln::test::shared_models_dir() / "stories260K.gguf").string()); }

}  // namespace

TEST_CASE("escapes turn into the characters they name, as llama.cpp's string_process_escapes", "[cli][escapes]") {
    CHECK(process_escapes(R"(a\nb\rc\td)") == "a\nb\rc\td");
    CHECK(process_escapes(R"(\'\"\\)") == "'\"\\");
    CHECK(process_escapes(R"(\x41\x62!)") == "Ab!");
    CHECK(process_escapes(R"(\x4g)") == R"(\x4g)");   // not two hex digits: as written
    CHECK(process_escapes(R"(\x4)") == R"(\x4)");     // too short
    CHECK(process_escapes(R"(\q \0)") == R"(\q \0)"); // unknown escapes stay
    CHECK(process_escapes("ends with \\") == "ends with \\");
    CHECK(process_escapes(R"(\\n)") == "\\n");        // an escaped backslash, then n
    CHECK(process_escapes("") == "");
}

TEST_CASE("kiln -p takes escapes by default and --no-escape keeps them", "[cli][escapes]") {
    const auto escaped = kiln::test::run_tool("kiln", "-m " + stories() + R"( -p 'One\nTwo' -n 0)");
    REQUIRE(escaped.status == 0);
    CHECK(escaped.out == "One\nTwo\n");
    const auto with_e = kiln::test::run_tool("kiln", "-m " + stories() + R"( -e -p 'One\nTwo' -n 0)");
    CHECK(with_e.out == "One\nTwo\n");
    const auto verbatim = kiln::test::run_tool("kiln", "-m " + stories() + R"( --no-escape -p 'One\nTwo' -n 0)");
    CHECK(verbatim.out == "One\\nTwo\n");
}

TEST_CASE("kiln -f - reads the prompt from standard input, less one final newline", "[cli]") {
    const auto from_stdin =
        kiln::test::run_command("printf 'Once upon a time\\n' | " + kiln::test::tool_command("kiln") +
                                " -m " + stories() + " -f - -n 8 -s 3 --temp 0");
    INFO(from_stdin.err);
    REQUIRE(from_stdin.status == 0);
    const auto from_flag = kiln::test::run_tool("kiln", "-m " + stories() + " -p 'Once upon a time' -n 8 -s 3 --temp 0");
    CHECK(from_stdin.out == from_flag.out);
}

TEST_CASE("kiln -b and -ub split the prompt into pieces and change nothing in the text", "[cli]") {
    // A prompt of ~60 tokens, evaluated whole, in pieces of 7 (-ub) and of 5 (-b below -ub).
    const std::string prompt = "'Once upon a time there was a little girl named Lily. She loved to play outside in the "
                               "park with her friends. One day she saw a big red ball'";
    const std::string base = "-m " + stories() + " -p " + prompt + " -n 16 --temp 0 -t 1";
    const auto whole = kiln::test::run_tool("kiln", base);
    REQUIRE(whole.status == 0);
    for (const char* flags : {" -ub 7", " -b 5", " -b 2048 -ub 13"}) {
        INFO(flags);
        const auto pieces = kiln::test::run_tool("kiln", base + flags);
        CHECK(pieces.status == 0);
        CHECK(pieces.out == whole.out);
    }
    const auto bad = kiln::test::run_tool("kiln", base + " -ub 0");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("-ub must be between 1 and") != std::string::npos);
}

TEST_CASE("kiln -n -2 generates until the context is full, and no further", "[cli]") {
    const auto run = kiln::test::run_tool("kiln", "-m " + stories() + " -p Once -n -2 -c 24 --ignore-eos -s 5");
    INFO(run.err);
    REQUIRE(run.status == 0);
    // "Once" is BOS + 1 token: 22 more fill the context of 24.
    CHECK(run.err.find("generation 22 tokens") != std::string::npos);
    CHECK(run.err.find("is full") == std::string::npos);  // never slides the window
}

TEST_CASE("kiln-perplexity's default window fits a model with fewer positions than 512", "[cli][perplexity]") {
    const std::string model = shell_quote((kiln::test::source_dir() / "models" / "shakespeare-char.gguf").string());
    const std::string text = shell_quote((kiln::test::shared_dir() / "data" / "tinyshakespeare.txt").string());
    const auto fitted = kiln::test::run_tool("kiln-perplexity", "-m " + model + " -f " + text + " --chunks 2");
    INFO(fitted.err);
    REQUIRE(fitted.status == 0);
    CHECK(fitted.err.find("windows of 64 tokens, the model's context") != std::string::npos);
    CHECK(fitted.out.find("(2 windows of 64)") != std::string::npos);
    // The same as asking for it.
    const auto asked = kiln::test::run_tool("kiln-perplexity", "-m " + model + " -f " + text + " --chunks 2 -c 64");
    CHECK(asked.out == fitted.out);
    // Too long a window names the model's limit.
    const auto too_long = kiln::test::run_tool("kiln-perplexity", "-m " + model + " -f " + text + " --chunks 2 -c 128");
    CHECK(too_long.status == 1);
    CHECK(too_long.err.find("context 128 is outside 1..64") != std::string::npos);
}

TEST_CASE("kiln-perplexity -b/-ub score windows in pieces with the same result", "[cli][perplexity]") {
    const std::string text = shell_quote((kiln::test::shared_dir() / "data" / "tinyshakespeare.txt").string());
    const std::string base = "-m " + stories() + " -f " + text + " --chunks 2 -c 128 -t 1";
    const auto whole = kiln::test::run_tool("kiln-perplexity", base);
    REQUIRE(whole.status == 0);
    const auto pieces = kiln::test::run_tool("kiln-perplexity", base + " -b 48");
    REQUIRE(pieces.status == 0);
    // Each piece's rows are computed by the same kernels: the text output agrees.
    CHECK(pieces.out == whole.out);
}
