// `kiln` with the gpt2 and transformer architectures as a user runs it:
// converted PyTorch checkpoints, greedy and beam decoding, and bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/tensor_data.h"

using namespace kiln;
using test::shell_quote;

namespace {

// Removes the converted files when the test program ends.
struct TempFiles {
    std::vector<std::filesystem::path> paths;
    ~TempFiles() {
        std::error_code ec;
        for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
};

// Converts a fixture checkpoint once per test run; returns the GGUF path.
std::string converted(const std::string& fixture, const std::string& extra = "") {
    static TempFiles temp_files;
    const auto out =
        std::filesystem::temp_directory_path() / fmt::format("kiln-cli-{}-{}.gguf", ::getpid(), std::hash<std::string>{}(fixture));
    if (!std::filesystem::exists(out)) {
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} {}", shell_quote((test::fixtures_dir() / fixture).string()),
                                                                     shell_quote(out.string()), extra));
        INFO(run.err);
        REQUIRE(run.status == 0);
        temp_files.paths.push_back(out);
    }
    return out.string();
}

std::string transformer_model() { return converted("transformer/postln_relu.pt"); }

void require_one_line_error(const test::ToolRun& run, int status, std::string_view fragment) {
    INFO("stderr: " << run.err);
    CHECK(run.status == status);
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fragment) != std::string::npos);
}

}  // namespace

TEST_CASE("kiln prints an encoder-decoder model's source and its greedy output", "[cli][transformer]") {
    const std::string model = transformer_model();
    const GgufFile ref = GgufFile::open(test::fixtures_dir() / "transformer" / "postln_relu_reference.gguf");
    const auto tokenizer = load_tokenizer(GgufFile::open(model));
    for (int s = 0; s < 4; ++s) {
        const std::string text = ref.get_string(fmt::format("s{}.text", s));
        auto greedy = test::values_of<int32_t>(ref.get_tensor(fmt::format("s{}.greedy", s)));
        if (!greedy.empty() && greedy.back() == tokenizer->eos()) greedy.pop_back();
        const auto run = test::run_tool("kiln", fmt::format("-m {} -p {} -t 1", shell_quote(model), shell_quote(text)));
        INFO(run.err);
        REQUIRE(run.status == 0);
        CHECK(run.out == fmt::format("source: {}\noutput: {}\n", text, tokenizer->decode(greedy)));
    }
}

TEST_CASE("kiln --no-mmap on an encoder-decoder gives the mapped model's output, and -v says where the weights are",
          "[cli][transformer]") {
    const std::string model = shell_quote(transformer_model());
    const auto mapped = test::run_tool("kiln", fmt::format("-m {} -p 'hello world' -t 1 -v", model));
    const auto copied = test::run_tool("kiln", fmt::format("-m {} -p 'hello world' -t 1 -v --no-mmap --mlock", model));
    INFO(mapped.err << copied.err);
    REQUIRE(mapped.status == 0);
    REQUIRE(copied.status == 0);
    CHECK(copied.out == mapped.out);
    CHECK(mapped.err.find("kiln: weights mapped: ") != std::string::npos);
    CHECK(mapped.err.find("kiln: copied ") == std::string::npos);
    CHECK(copied.err.find("kiln: weights copied (--no-mmap): 0.0 MiB computed from the file mapping") != std::string::npos);
    const GgufFile f = GgufFile::open(transformer_model());
    uint64_t bytes = 0;
    for (const GgufTensor& t : f.tensors()) bytes += t.data.size();
    CHECK(copied.err.find(fmt::format("kiln: copied in all: {} tensors, {} bytes\n", f.tensors().size(), bytes)) !=
          std::string::npos);
}

TEST_CASE("kiln --beams --n-best lists every finished hypothesis", "[cli][transformer]") {
    const auto run = test::run_tool(
        "kiln", fmt::format("-m {} -p 'hello world' --beams 4 --n-best --length-penalty 0.6 -t 1", shell_quote(transformer_model())));
    INFO(run.err);
    REQUIRE(run.status == 0);
    // One line for the source, then one per hypothesis: the reference finished 5 (k4, a0.6).
    const GgufFile ref = GgufFile::open(test::fixtures_dir() / "transformer" / "postln_relu_reference.gguf");
    const size_t expected = ref.find("s0.beam.k4.a0.6.normalized")->as_array()->items.size();
    CHECK(std::count(run.out.begin(), run.out.end(), '\n') == static_cast<std::ptrdiff_t>(expected + 1));
    CHECK(run.out.find("[1] score ") != std::string::npos);
}

TEST_CASE("kiln with gpt2 models: beams, sampling and greedy run", "[cli][gpt2]") {
    const std::string model = converted("gpt2/nanogpt_bias.pt", "--tokenizer " + shell_quote((test::fixtures_dir() / "gpt2" / "meta.pkl").string()));
    for (const char* flags : {"--temp 0", "--beams 3", "--seed 5", "--beams 2 --n-best"}) {
        const auto run = test::run_tool("kiln", fmt::format("-m {} -p 'ROMEO:' -n 12 -t 1 {}", shell_quote(model), flags));
        INFO(flags << ": " << run.err);
        CHECK(run.status == 0);
        CHECK(run.out.find("ROMEO:") != std::string::npos);
    }
}

TEST_CASE("kiln bad input with encoder-decoder and beam flags", "[cli][transformer]") {
    const std::string model = shell_quote(transformer_model());
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p abc --beams 0", model)), 2, "--beams must be");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p abc --n-best", model)), 2, "need --beams");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p abc -ctk f16", model)), 1,
                           "-ctk/-ctv apply to decoder-only models");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p abc -ctv q5_0", model)), 2,
                           "-ctv must be f32, f16, bf16, q8_0 or q4_0, got 'q5_0'");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {}", model)), 1, "needs a source text");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p 'abcdefgh' -c 4", model)), 1,
                           "longer than the encoder's context of 4");
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p \"$(printf 'caf\\303')\"", model)), 1, "not valid UTF-8");
    // A character outside the vocabulary (which has no unknown token).
    require_one_line_error(test::run_tool("kiln", fmt::format("-m {} -p 'snow \u2603'", model)), 1, "U+2603");
}
