// Every path a tool reads must be a regular file, checked without blocking:
// opening a FIFO for reading waits for a writer (forever, for a forgotten
// one), and a directory read as a file gave an empty prompt. Each run is
// wrapped in `timeout` so that a regression fails instead of hanging.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
namespace fs = std::filesystem;
using test::shell_quote;

namespace {

std::string q(const fs::path& p) { return shell_quote(p.string()); }

std::string model() { return q(test::shared_models_dir() / "stories260K.gguf"); }

// One line on stderr that names the path and what it is; nothing on stdout; exit 1.
void require_refused(const std::string& tool, const std::string& args, const fs::path& path, std::string_view what) {
    const test::ToolRun run = test::run_tool(tool, args, "timeout 20");
    INFO(tool << " " << args << "\nstderr: " << run.err);
    CHECK(run.status == 1);  // 124: it blocked until timeout killed it
    CHECK(run.out.empty());
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fmt::format("'{}' is not a regular file: it is {}", path.string(), what)) != std::string::npos);
}

size_t entries(const fs::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

}  // namespace

TEST_CASE("a FIFO given as any input is refused at once", "[cli][hostile]") {
    test::TempDir dir;
    const fs::path fifo = dir.path() / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const std::string text = q(test::shared_dir() / "data" / "tinyshakespeare.txt");
    const std::string f = q(fifo);
    const std::string_view what = "a FIFO (named pipe)";

    require_refused("kiln", "-m " + f + " -p hi", fifo, what);
    require_refused("kiln", "-m " + model() + " -f " + f, fifo, what);
    require_refused("kiln-tokenize", "-m " + f + " -p hi", fifo, what);
    require_refused("kiln-tokenize", "-m " + model() + " -f " + f, fifo, what);
    require_refused("kiln-perplexity", "-m " + f + " -f " + text, fifo, what);
    require_refused("kiln-perplexity", "-m " + model() + " -f " + f + " -c 128", fifo, what);
    require_refused("kiln-convert", "inspect " + f, fifo, what);
    require_refused("kiln-convert", f + " -o " + q(dir.path() / "out.gguf"), fifo, what);
    require_refused("kiln-convert", q(test::shared_models_dir() / "stories260K.bin") + " -o " + q(dir.path() / "out.gguf") + " --tokenizer " + f, fifo, what);
    const std::string out = " -o " + q(dir.path() / "m.gguf") + " --iters 1 --warmup 0 -t 1";
    require_refused("kiln-train", "-f " + f + out, fifo, what);
    require_refused("kiln-train", "-f " + text + out + " --arch llama --vocab " + f, fifo, what);
    require_refused("kiln-train", "-f " + text + out + " --resume " + f, fifo, what);
    CHECK(entries(dir.path()) == 1);  // the FIFO alone: no output, no temporary, no log
}

TEST_CASE("a directory given as a prompt or text file is refused", "[cli][hostile]") {
    test::TempDir dir;
    const std::string d = q(dir.path());
    const std::string_view what = "a directory";
    require_refused("kiln", "-m " + model() + " -f " + d, dir.path(), what);
    // (kiln -m DIRECTORY says more: "convert it first", tests/test_model_path_hints.cpp.)
    require_refused("kiln-tokenize", "-m " + model() + " -f " + d, dir.path(), what);
    require_refused("kiln-perplexity", "-m " + model() + " -f " + d + " -c 128", dir.path(), what);
    require_refused("kiln-train", "-f " + d + " -o " + q(dir.path() / "m.gguf") + " --iters 1 --warmup 0 -t 1", dir.path(), what);
    CHECK(fs::is_empty(dir.path()));
}

TEST_CASE("a prompt with NUL bytes is echoed whole", "[cli][hostile]") {
    test::TempDir dir;
    const fs::path prompt = dir.path() / "prompt.txt";
    const std::string text("Once\0upon a time", 16);
    test::write_file(prompt, std::as_bytes(std::span(text.data(), text.size())));
    const test::ToolRun run = test::run_tool("kiln", "-m " + model() + " -f " + q(prompt) + " -n 0 -t 1");
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out == text + "\n");
}
