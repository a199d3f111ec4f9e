// kiln-perplexity against a PyTorch + Python-tokenizer computation of the same
// score (tests/reference/make_perplexity_fixture.py).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

std::map<std::string, std::string> read_fixture() {
    std::ifstream in(test::fixtures_dir() / "llama" / "stories260K_perplexity.txt");
    REQUIRE(in.good());
    std::map<std::string, std::string> values;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string key, value;
        fields >> key >> value;
        values[key] = value;
    }
    return values;
}

}  // namespace

TEST_CASE("kiln-perplexity equals the reference perplexity", "[cli][perplexity]") {
    auto fixture = read_fixture();
    test::TempDir dir;
    const auto text = test::shared_dir() / "data" / "tinyshakespeare.txt";
    const auto all = test::read_file(text);
    const auto bytes = static_cast<size_t>(std::stoul(fixture["bytes"]));
    test::write_file(dir.path() / "text.txt", std::span(all).first(bytes));
    const std::string model = (test::shared_models_dir() / "stories260K.gguf").string();
    for (int threads : {1, 2}) {
        const auto run = test::run_tool(
            "kiln-perplexity", fmt::format("-m {} -f {} -c {} -t {}", test::shell_quote(model),
                                           test::shell_quote((dir.path() / "text.txt").string()), fixture["ctx"], threads));
        INFO(run.err);
        REQUIRE(run.status == 0);
        double ppl = 0;
        long scored = 0;
        REQUIRE(std::sscanf(run.out.c_str(), "PPL = %lf over %ld scored tokens", &ppl, &scored) == 2);
        CHECK(scored == std::stol(fixture["scored"]));
        CHECK(ppl == Approx(std::stod(fixture["ppl"])).epsilon(1e-5));
    }
}

TEST_CASE("kiln-perplexity refuses texts shorter than one window and bad flags", "[cli][perplexity]") {
    test::TempDir dir;
    test::write_file(dir.path() / "short.txt", std::as_bytes(std::span("a few words", 11)));
    const std::string model = test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string());
    const auto short_run = test::run_tool(
        "kiln-perplexity", fmt::format("-m {} -f {} -c 64", model, test::shell_quote((dir.path() / "short.txt").string())));
    CHECK(short_run.status == 1);
    CHECK(short_run.err.find("fewer than one window of 64") != std::string::npos);
    const auto no_file = test::run_tool("kiln-perplexity", "-m " + model);
    CHECK(no_file.status == 2);
    CHECK(no_file.err.find("a text file is required") != std::string::npos);
    const auto bad_ctx = test::run_tool("kiln-perplexity", "-m " + model + " -f x -c 1");
    CHECK(bad_ctx.status == 2);
}
