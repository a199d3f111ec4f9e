// --no-mmap and --mlock in every tool that loads a model, with llama.cpp's
// meaning: the same results as the default (weights read from the file
// mapping); `kiln -v` reports the load (time, peak RSS, where the weights are,
// each copy); kiln-bench's -mmp picks the same placement and reports it as use_mmap.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <span>

#include "engine/core/platform.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "tools/server/server_options.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::filesystem::path stories_path() { return test::shared_models_dir() / "stories260K.gguf"; }

test::ToolRun kiln_run(const std::string& args) {
    return test::run_tool_measured("kiln", fmt::format("-m {} -p 'Once upon a time' -n 24 --temp 0 -t 1 {}",
                                                       shell_quote(stories_path().string()), args));
}

// The "peak RSS X MiB (VmHWM)" figure of kiln -v, in KiB ("(ru_maxrss)" off
// Linux and with KILN_GENERIC_OS: engine/core/platform.h).
double reported_peak_kib(const std::string& err) {
    const size_t at = err.find("peak RSS ");
    REQUIRE(at != std::string::npos);
    double mib = 0;
    char source[16] = {};
    REQUIRE(std::sscanf(err.c_str() + at, "peak RSS %lf MiB (%15[a-zA-Z_])", &mib, source) == 2);
    CHECK(std::string(source) == (KILN_OS_LINUX ? "VmHWM" : "ru_maxrss"));
    return mib * 1024;
}

}  // namespace

TEST_CASE("kiln --no-mmap and --mlock give the default's text, and -v reports the load", "[cli][llama]") {
    const auto plain = kiln_run("");
    const auto mapped = kiln_run("-v");
    const auto copied = kiln_run("--no-mmap --mlock --verbose");
    INFO("mapped: " << mapped.err << "copied: " << copied.err);
    REQUIRE(plain.status == 0);
    REQUIRE(mapped.status == 0);
    REQUIRE(copied.status == 0);
    CHECK(mapped.out == plain.out);
    CHECK(copied.out == plain.out);
    CHECK(plain.err.find("peak RSS") == std::string::npos);  // only with -v

    const GgufFile f = GgufFile::open(stories_path());
    uint64_t bytes = 0;
    for (const GgufTensor& t : f.tensors()) bytes += t.data.size();
    // Mapped: every byte from the file (stories260K is F32, which no kernel rearranges).
    CHECK(mapped.err.find(fmt::format("kiln: weights mapped: {:.1f} MiB computed from the file mapping, 0 tensors "
                                      "(0.0 MiB) copied\n", bytes / 1048576.0)) != std::string::npos);
    CHECK(mapped.err.find("kiln: copied ") == std::string::npos);
    CHECK(mapped.err.find("kiln: load ") != std::string::npos);
    // Copied: each tensor named with its type and size, then the total.
    CHECK(copied.err.find("kiln: weights copied (--no-mmap): 0.0 MiB computed from the file mapping") != std::string::npos);
    for (const GgufTensor& t : f.tensors())
        CHECK(copied.err.find(fmt::format("kiln: copied {} {} {} bytes\n", t.name, dtype_name(t.type), t.data.size())) !=
              std::string::npos);
    CHECK(copied.err.find(fmt::format("kiln: copied in all: {} tensors, {} bytes\n", f.tensors().size(), bytes)) !=
          std::string::npos);
    // Locked, or (a small RLIMIT_MEMLOCK without root) one warning naming the limit.
    CHECK((copied.err.find("kiln: weights locked in RAM (--mlock): ") != std::string::npos ||
           copied.err.find("RLIMIT_MEMLOCK is") != std::string::npos));
    // The peak after the load cannot exceed the whole run's (wait4's ru_maxrss of the same process).
    for (const test::ToolRun* run : {&mapped, &copied}) {
        const double peak = reported_peak_kib(run->err);
        CHECK(peak > 0);
        CHECK(peak <= run->peak_rss_kib + 1);
    }
}

TEST_CASE("kiln-perplexity --no-mmap --mlock scores as the default does", "[cli][perplexity]") {
    test::TempDir dir;
    const auto all = test::read_file(test::shared_dir() / "data" / "tinyshakespeare.txt");
    test::write_file(dir.path() / "text.txt", std::span(all).first(3000));
    const std::string args = fmt::format("-m {} -f {} -c 64 --chunks 3 -t 1", shell_quote(stories_path().string()),
                                         shell_quote((dir.path() / "text.txt").string()));
    const auto mapped = test::run_tool("kiln-perplexity", args);
    const auto copied = test::run_tool("kiln-perplexity", args + " --no-mmap --mlock");
    INFO(mapped.err << copied.err);
    REQUIRE(mapped.status == 0);
    REQUIRE(copied.status == 0);
    CHECK(copied.out == mapped.out);
    CHECK(mapped.out.find("PPL = ") != std::string::npos);
}

TEST_CASE("kiln-server takes --no-mmap and --mlock", "[cli][server]") {
    const auto parse = [](std::vector<std::string> words) {
        std::vector<char*> argv;
        for (std::string& w : words) argv.push_back(w.data());
        return server::parse_server_options(static_cast<int>(argv.size()), argv.data());
    };
    const server::ServerOptions plain = parse({"kiln-server", "-m", "m.gguf"});
    CHECK(plain.placement.mmap);
    CHECK_FALSE(plain.placement.mlock);
    const server::ServerOptions both = parse({"kiln-server", "-m", "m.gguf", "--no-mmap", "--mlock"});
    CHECK_FALSE(both.placement.mmap);
    CHECK(both.placement.mlock);
}

TEST_CASE("kiln-bench -mmp: the file mapping by default, every weight copied with -mmp 0", "[cli][bench]") {
    const std::string model = shell_quote(stories_path().string());
    for (const auto& [flag, mapped] : {std::pair{"", true}, std::pair{"-mmp 1", true}, std::pair{"-mmp 0", false}}) {
        const auto run = test::run_tool("kiln-bench", fmt::format("-m {} -t 1 -r 1 -p 0 -n 2 -o json {}", model, flag));
        INFO(flag << ": " << run.err);
        REQUIRE(run.status == 0);
        const auto records = nlohmann::json::parse(run.out);
        REQUIRE(records.size() == 1);
        CHECK(records[0]["use_mmap"] == mapped);
    }
}

TEST_CASE("every tool that loads a model lists --no-mmap and --mlock in --help", "[cli]") {
    for (const char* tool : {"kiln", "kiln-perplexity", "kiln-server"}) {
        const auto run = test::run_tool(tool, "--help");
        INFO(tool);
        CHECK(run.status == 0);
        CHECK(run.out.find("--no-mmap") != std::string::npos);
        CHECK(run.out.find("--mlock") != std::string::npos);
    }
    CHECK(test::run_tool("kiln", "--help").out.find("-v, --verbose") != std::string::npos);
}
