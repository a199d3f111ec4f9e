// A model path that is not a GGUF model gets a message that points the way: a
// Hugging Face folder or a .safetensors/.pt/.bin checkpoint says to convert it
// first with kiln-convert, and a vocabulary-only GGUF says that is all it holds,
// whichever tool opened it.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
    test::write_file(path, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

// Runs `tool` on the model path; the failure must be one line containing `fragment`.
void check_refusal(const std::string& tool, const std::string& flags, const std::filesystem::path& model,
                   const std::string& fragment) {
    const test::ToolRun run = test::run_tool(tool, fmt::format(fmt::runtime(flags), shell_quote(model.string())));
    INFO(tool << " " << model << ": " << run.err);
    CHECK(run.status == 1);
    CHECK(run.out.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fragment) != std::string::npos);
}

const std::vector<std::pair<std::string, std::string>> kModelTools = {
    {"kiln", "-m {} -p Hi -n 4"}, {"kiln-perplexity", "-m {} -f " + shell_quote((test::shared_dir() / "data" / "tinyshakespeare.txt").string())}, {"kiln-bench", "-m {} -r 1 -p 4 -n 0"}};

}  // namespace

TEST_CASE("a folder or a checkpoint given as a model says: convert it first with kiln-convert", "[cli][hints]") {
    const test::TempDir dir;
    const auto folder = dir.path() / "hf-model";
    std::filesystem::create_directory(folder);
    write_bytes(folder / "config.json", "{}");
    // A safetensors header: its length, then JSON.
    const auto safetensors = dir.path() / "model.safetensors";
    write_bytes(safetensors, std::string("\x02\0\0\0\0\0\0\0{}", 10));
    const auto unnamed_safetensors = dir.path() / "weights";
    write_bytes(unnamed_safetensors, std::string("\x02\0\0\0\0\0\0\0{}", 10));
    const auto pt = dir.path() / "ckpt.pt";
    write_bytes(pt, "PK\x03\x04 rest of a zip");
    const auto bin = dir.path() / "stories.bin";
    write_bytes(bin, std::string(64, '\x07'));

    for (const auto& [tool, flags] : kModelTools) {
        for (const auto& path : {folder, safetensors, unnamed_safetensors, pt, bin}) {
            check_refusal(tool, flags, path, "not a GGUF file: convert it first: kiln-convert " + path.string() + " -o model.gguf");
        }
        check_refusal(tool, flags, folder, "is a folder");
        check_refusal(tool, flags, safetensors, "is a safetensors file");
        check_refusal(tool, flags, pt, "is a PyTorch checkpoint");
    }
}

TEST_CASE("a file that is neither GGUF nor a checkpoint keeps the byte-level message", "[cli][hints]") {
    const test::TempDir dir;
    const auto text = dir.path() / "notes.gguf";
    write_bytes(text, "just some text, long enough to hold a header");
    const test::ToolRun run = test::run_tool("kiln", "-m " + shell_quote(text.string()) + " -p Hi");
    CHECK(run.status == 1);
    CHECK(run.err.find("not a GGUF file (the first 4 bytes are not \"GGUF\")") != std::string::npos);
    CHECK(run.err.find("kiln-convert") == std::string::npos);
}

TEST_CASE("a vocabulary-only GGUF given as a model says it holds only a vocabulary", "[cli][hints]") {
    for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
        const auto path = test::shared_models_dir() / "vocab" / vocab;
        for (const auto& [tool, flags] : kModelTools) check_refusal(tool, flags, path, "holds only a vocabulary");
    }
}
