// `kiln` as a user runs it: greedy text equal to the PyTorch reference's,
// reproducible sampling, and one clear line for every kind of bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <regex>

#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::string model_path() { return (test::shared_models_dir() / "stories260K.gguf").string(); }

test::ToolRun kiln_run(const std::string& args) {
    return test::run_tool("kiln", fmt::format("-m {} {}", shell_quote(model_path()), args));
}

void require_one_line_error(const test::ToolRun& run, int status, std::string_view fragment) {
    INFO("stderr: " << run.err);
    CHECK(run.status == status);
    CHECK(run.out.empty());
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fragment) != std::string::npos);
}

}  // namespace

TEST_CASE("kiln --temp 0 prints the prompt and the reference's greedy continuation", "[cli][llama]") {
    const GgufFile ref = GgufFile::open(test::fixtures_dir() / "llama" / "stories260K_reference.gguf");
    for (int p : {0, 1, 2, 4}) {
        // The reference decodes with the tokenizer's leading space; a user types the prompt without it.
        std::string prompt = ref.get_string(fmt::format("p{}.text", p));
        if (!prompt.empty() && prompt[0] == ' ') prompt.erase(0, 1);
        std::string continuation = ref.get_string(fmt::format("p{}.greedy_text", p));
        if (prompt.empty()) continuation.erase(0, 1);  // the first word of the text carries no space
        const auto run = kiln_run(fmt::format("-p {} -n 100 --temp 0 -c 256 -t 2", shell_quote(prompt)));
        INFO("prompt " << p << ": " << run.err);
        REQUIRE(run.status == 0);
        CHECK(run.out == prompt + continuation + "\n");
        CHECK(run.err.find("generation 100 tokens") != std::string::npos);
    }
}

TEST_CASE("the same seed and flags give the same text", "[cli][llama]") {
    const std::string args = "-p 'Once upon a time' -n 48 --seed 7 --temp 1.0 --top-k 20 --top-p 0.9 -t 1";
    const auto a = kiln_run(args);
    const auto b = kiln_run(args);
    REQUIRE(a.status == 0);
    CHECK(a.out == b.out);
    const auto c = kiln_run("-p 'Once upon a time' -n 48 --seed 8 --temp 1.0 --top-k 20 --top-p 0.9 -t 2");
    CHECK(c.out != a.out);
    CHECK(a.err.find("seed 7") != std::string::npos);
}

TEST_CASE("kiln -s -1 picks a random seed, as llama.cpp's default", "[cli][llama]") {
    // Two runs with -s -1 draw their own seeds (printed), each of which replays its text.
    const std::string flags = "-p 'Once upon a time' -n 24 --temp 1.0 -t 1 ";
    const auto a = kiln_run(flags + "-s -1");
    const auto b = kiln_run(flags + "-s -1");
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    std::smatch ma, mb;
    REQUIRE(std::regex_search(a.err, ma, std::regex("seed (\\d+)")));
    REQUIRE(std::regex_search(b.err, mb, std::regex("seed (\\d+)")));
    CHECK(ma[1] != mb[1]);
    const auto replay = kiln_run(flags + "-s " + std::string(ma[1]));
    CHECK(replay.out == a.out);
    require_one_line_error(kiln_run(flags + "-s -2"), 2, "-s must be at least -1, got -2");
}

TEST_CASE("kiln --logit-bias and the presence and frequency penalties, as llama.cpp's flags", "[cli][llama]") {
    // Token 407 is " upon" in stories260K's vocabulary: +100 makes greedy pick it every time.
    const auto forced = kiln_run("-p 'Once upon a time' -n 5 --temp 0 -l 407+100");
    REQUIRE(forced.status == 0);
    CHECK(forced.out == "Once upon a time upon upon upon upon upon\n");
    // A ban of greedy's first choice changes the text; a bias of 0 does not.
    const auto greedy = kiln_run("-p 'Once upon a time' -n 5 --temp 0");
    const auto zero = kiln_run("-p 'Once upon a time' -n 5 --temp 0 --logit-bias 407+0 --presence-penalty 0");
    REQUIRE(greedy.status == 0);
    CHECK(zero.out == greedy.out);
    REQUIRE(greedy.out.rfind("Once upon a time,", 0) == 0);  // greedy's first token is ","
    // Its id: the last of the prompt with the comma, as kiln-tokenize writes it.
    const auto tokens = test::run_tool("kiln-tokenize", "-m " + shell_quote(model_path()) + " -p 'Once upon a time,' --no-bos");
    INFO(tokens.out << tokens.err);
    REQUIRE(tokens.status == 0);
    const std::string ids = tokens.out.substr(0, tokens.out.find_last_not_of(" \n") + 1);
    const std::string comma = ids.substr(ids.find_last_of(' ') + 1);
    const auto banned = kiln_run("-p 'Once upon a time' -n 5 --temp 0 -l " + comma + "-inf");
    REQUIRE(banned.status == 0);
    CHECK(banned.out.rfind("Once upon a time,", 0) != 0);
    require_one_line_error(kiln_run("-l 512+1"), 1, "--logit-bias token 512 is outside the vocabulary (0..511)");
    require_one_line_error(kiln_run("-l 12"), 2, "-l expects TOKEN_ID+BIAS or TOKEN_ID-BIAS");
    require_one_line_error(kiln_run("-l 12+x"), 2, "-l expects a number, got 'x'");
    require_one_line_error(kiln_run("--presence-penalty high"), 2, "--presence-penalty expects a number");
    require_one_line_error(kiln_run("-n 4 --beams 2 --frequency-penalty 1"), 2, "--beams does not use them");
}

TEST_CASE("kiln refuses bad input with one line and the right status", "[cli][llama]") {
    test::TempDir dir;
    require_one_line_error(test::run_tool("kiln", "-p hi"), 2, "a model is required");
    require_one_line_error(test::run_tool("kiln", "-m " + shell_quote((dir.path() / "missing.gguf").string())), 1,
                           "cannot open");
    require_one_line_error(kiln_run("--frobnicate"), 2, "unknown argument '--frobnicate'");
    require_one_line_error(kiln_run("--temp hot"), 2, "--temp expects a number, got 'hot'");
    require_one_line_error(kiln_run("-n -5"), 2, "-n must be between -2 and");
    require_one_line_error(kiln_run("-t 0"), 2, "-t must be between 1 and 1024");
    require_one_line_error(kiln_run("-n"), 2, "-n needs a value");
    require_one_line_error(kiln_run("-p 'Once upon a time there was a dog' -c 4"), 1,
                           "longer than the context of 4");
    require_one_line_error(kiln_run("-p 'Once upon a time' -c 64 -n 100 --beams 2"), 1, "do not fit the context of 64");
    require_one_line_error(kiln_run("-p " + shell_quote("abc\xff\xfe")), 1, "not valid UTF-8");
    const auto gpt2 = (test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf").string();
    require_one_line_error(test::run_tool("kiln", "-m " + shell_quote(gpt2)), 1, "holds only a vocabulary");
    const auto vocab_only = (test::shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string();
    require_one_line_error(test::run_tool("kiln", "-m " + shell_quote(vocab_only)), 1, "holds only a vocabulary");
    const auto cut = dir.path() / "cut.gguf";
    const auto bytes = test::read_file(model_path());
    test::write_file(cut, std::span(bytes).first(bytes.size() / 2));
    require_one_line_error(test::run_tool("kiln", "-m " + shell_quote(cut.string())), 1, "past the end of the file");
}

TEST_CASE("kiln -n 0 prints the prompt only, and an empty prompt starts from BOS", "[cli][llama]") {
    const auto none = kiln_run("-p 'Once upon a time' -n 0");
    REQUIRE(none.status == 0);
    CHECK(none.out == "Once upon a time\n");
    const auto from_bos = kiln_run("-n 8 --temp 0");
    REQUIRE(from_bos.status == 0);
    CHECK(from_bos.out.rfind("Once upon a time", 0) == 0);
}

TEST_CASE("kiln goes on past a full context from the last half of it", "[cli][llama]") {
    // Greedy: the first tokens equal an unconstrained run's, and all 100 are generated.
    const auto wide = kiln_run("-p 'Once upon a time' -n 40 --temp 0 -c 256 -t 1");
    const auto narrow = kiln_run("-p 'Once upon a time' -n 100 --temp 0 -c 32 -t 1");
    REQUIRE(wide.status == 0);
    REQUIRE(narrow.status == 0);
    CHECK(narrow.err.find("the context of 32 is full") != std::string::npos);
    CHECK(narrow.err.find("generation 100 tokens") != std::string::npos);
    // Up to the first slide (32 positions, 5 of them the prompt) the two texts agree.
    const std::string shared = wide.out.substr(0, 60);
    CHECK(narrow.out.rfind(shared.substr(0, 40), 0) == 0);
}
