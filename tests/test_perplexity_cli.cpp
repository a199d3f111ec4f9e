// kiln-perplexity against a PyTorch + Python-tokenizer computation of the same
// score (tests/reference/make_perplexity_fixture.py).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/kernels/kernel_targets.h"
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
            "kiln-perplexity", fmt::format("-m {} -f {} -c {} -t {} --score-all", test::shell_quote(model),
                                           test::shell_quote((dir.path() / "text.txt").string()), fixture["ctx"], threads));
        INFO(run.err);
        REQUIRE(run.status == 0);
        double ppl = 0;
        long scored = 0;
        REQUIRE(std::sscanf(run.out.c_str(), "PPL = %lf +/- %*f over %ld scored tokens", &ppl, &scored) == 2);
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
    CHECK(short_run.err.find("fewer than two windows of 64") != std::string::npos);
    const auto short_all = test::run_tool(
        "kiln-perplexity",
        fmt::format("-m {} -f {} -c 64 --score-all", model, test::shell_quote((dir.path() / "short.txt").string())));
    CHECK(short_all.status == 1);
    CHECK(short_all.err.find("fewer than one window of 64") != std::string::npos);
    const auto no_file = test::run_tool("kiln-perplexity", "-m " + model);
    CHECK(no_file.status == 2);
    CHECK(no_file.err.find("a text file is required") != std::string::npos);
    const auto bad_ctx = test::run_tool("kiln-perplexity", "-m " + model + " -f x -c 1");
    CHECK(bad_ctx.status == 2);
    // -c 2: the scored second half of each window is empty.
    const auto half_empty = test::run_tool(
        "kiln-perplexity", fmt::format("-m {} -f {} -c 2", model, test::shell_quote((dir.path() / "short.txt").string())));
    CHECK(half_empty.status == 1);
    CHECK(half_empty.err.find("leaves no position to score") != std::string::npos);
}

namespace {

std::map<std::string, std::string> read_key_values(const std::filesystem::path& path) {
    std::ifstream in(path);
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

// The value printed after "<label>:" in kiln-perplexity's statistics.
double printed(const std::string& out, const std::string& label) {
    const size_t at = out.find(label);
    REQUIRE(at != std::string::npos);
    const size_t colon = out.find(':', at + label.size());
    REQUIRE(colon != std::string::npos);
    return std::stod(out.substr(colon + 1));
}

// A text of `bytes` bytes of Tiny Shakespeare and the F32 / Q8_0 stories260K.
struct KlSetup {
    test::TempDir dir;
    std::string text, f32, q8_0;
    explicit KlSetup(size_t bytes) {
        const auto all = test::read_file(test::shared_dir() / "data" / "tinyshakespeare.txt");
        test::write_file(dir.path() / "text.txt", std::span(all).first(bytes));
        text = test::shell_quote((dir.path() / "text.txt").string());
        f32 = test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string());
        q8_0 = test::shell_quote((dir.path() / "q8_0.gguf").string());
        const auto convert = test::run_tool("kiln-convert", f32 + " -o " + q8_0 + " --type q8_0");
        INFO(convert.err);
        REQUIRE(convert.status == 0);
    }
    std::string base() const { return test::shell_quote((dir.path() / "base.bin").string()); }
};

}  // namespace

TEST_CASE("kiln-perplexity --kl-base: KL divergence, top-1 agreement and PPL ratio of Q8_0 equal the reference",
          "[cli][perplexity]") {
    auto fixture = read_key_values(test::fixtures_dir() / "llama" / "stories260K_kl_q8_0.txt");
    const KlSetup s(static_cast<size_t>(std::stoul(fixture["bytes"])));
    // The reference (PyTorch) computes in float32 throughout: the KV cache too.
    const std::string ctx = " -c " + fixture["ctx"] + " -ctk f32 -ctv f32";
    const auto saved = test::run_tool("kiln-perplexity", "-m " + s.f32 + " -f " + s.text + ctx + " --score-all --kl-base " + s.base());
    INFO(saved.err);
    REQUIRE(saved.status == 0);
    CHECK(saved.out.find("saved the logits of " + fixture["windows"] + " windows") != std::string::npos);
    const auto windows = std::stoull(fixture["windows"]), n_ctx = std::stoull(fixture["ctx"]);
    CHECK(std::filesystem::file_size(s.dir.path() / "base.bin") == 32 + windows * n_ctx * 4 + windows * (n_ctx - 1) * 512 * 4);

    for (int threads : {1, 2}) {
        const auto run = test::run_tool("kiln-perplexity", fmt::format("-m {} -f {}{} -t {} --score-all --kl-base {} --kl-divergence",
                                                                       s.q8_0, s.text, ctx, threads, s.base()));
        INFO(run.out << run.err);
        REQUIRE(run.status == 0);
        // The base is the F32 model, continuous in its inputs: kiln and PyTorch agree to 1e-5.
        CHECK(printed(run.out, "Mean PPL(base) ") == Approx(std::stod(fixture["base_ppl"])).epsilon(1e-5));
        // The Q8_0 side rounds every activation row to 8 bits, a step function:
        // a 1-ulp difference upstream (another summation order) can move one
        // code by one step, which moves that window's later logits by up to
        // ~0.3 on this small model. kiln's own scalar and SIMD kernel sets
        // differ from each other that much (PPL 69.940 vs 69.926; reference
        // 69.917). So the Q8_0 figures are checked to what such flips allow,
        // still far tighter than any error in the formulas would give (a
        // wrong log base, a missing normalization, the other model's
        // probabilities as weights are each off by large factors).
        CHECK(printed(run.out, "Mean PPL(Q) ") == Approx(std::stod(fixture["ppl"])).epsilon(1e-3));
        CHECK(printed(run.out, "Mean PPL(Q)/PPL(base) ") == Approx(std::stod(fixture["ppl_ratio"])).epsilon(1e-3));
        CHECK(printed(run.out, "Mean    KLD") == Approx(std::stod(fixture["mean_kl"])).epsilon(0.05));
        CHECK(printed(run.out, "Maximum KLD") == Approx(std::stod(fixture["max_kl"])).epsilon(0.2));
        CHECK(run.out.find("over " + fixture["scored"] + " scored tokens") != std::string::npos);
        const double same = printed(run.out, "Same top p") / 100.0 * std::stod(fixture["scored"]);
        CHECK(std::abs(same - std::stod(fixture["same_top"])) <= 10.5);
    }

    // The base model against its own logits: nothing diverges.
    const auto self = test::run_tool("kiln-perplexity", "-m " + s.f32 + " -f " + s.text + ctx + " --score-all --kl-base " +
                                                             s.base() + " --kl-divergence");
    REQUIRE(self.status == 0);
    CHECK(printed(self.out, "Mean    KLD") < 1e-9);
    CHECK(printed(self.out, "Mean PPL(Q)/PPL(base) ") == Approx(1.0).epsilon(1e-9));
    CHECK(self.out.find("Same top p: 100.000") != std::string::npos);
}

TEST_CASE("kiln-perplexity --kl-base refuses a base of other windows or a damaged file", "[cli][perplexity]") {
    const KlSetup s(3000);
    const auto saved = test::run_tool("kiln-perplexity", "-m " + s.f32 + " -f " + s.text + " -c 64 --kl-base " + s.base());
    REQUIRE(saved.status == 0);
    const auto compare = [&](const std::string& extra) {
        return test::run_tool("kiln-perplexity", "-m " + s.q8_0 + " -f " + s.text + " --kl-divergence " + extra);
    };
    const auto other_ctx = compare("-c 32 --kl-base " + s.base());
    CHECK(other_ctx.status == 1);
    CHECK(other_ctx.err.find("holds 28 windows of 64") != std::string::npos);
    const auto fewer = compare("-c 64 --chunks 3 --kl-base " + s.base());
    CHECK(fewer.status == 1);
    CHECK(fewer.err.find("use the same text, -c and --chunks") != std::string::npos);

    test::write_file(s.dir.path() / "junk.bin", std::as_bytes(std::span("not logits at all", 17)));
    const auto junk = compare("-c 64 --kl-base " + test::shell_quote((s.dir.path() / "junk.bin").string()));
    CHECK(junk.status == 1);
    CHECK(junk.err.find("is not a kiln-perplexity --kl-base file") != std::string::npos);

    auto bytes = test::read_file(s.dir.path() / "base.bin");
    bytes.resize(bytes.size() - 4);
    test::write_file(s.dir.path() / "short.bin", bytes);
    const auto truncated = compare("-c 64 --kl-base " + test::shell_quote((s.dir.path() / "short.bin").string()));
    CHECK(truncated.status == 1);
    CHECK(truncated.err.find("is damaged") != std::string::npos);

    // Another text of the same length in tokens is caught by its token ids.
    auto text = test::read_file(s.dir.path() / "text.txt");
    std::swap(text[0], text[1]);
    test::write_file(s.dir.path() / "other.txt", text);
    const auto other_text = test::run_tool(
        "kiln-perplexity", "-m " + s.q8_0 + " -f " + test::shell_quote((s.dir.path() / "other.txt").string()) +
                               " -c 64 --kl-divergence --kl-base " + s.base());
    CHECK(other_text.status != 0);

    const auto no_base = compare("-c 64");
    CHECK(no_base.status == 2);
    CHECK(no_base.err.find("--kl-divergence needs the base logits") != std::string::npos);
    const auto no_folder = test::run_tool("kiln-perplexity", "-m " + s.f32 + " -f " + s.text +
                                                                 " -c 64 --kl-base /nonexistent/dir/base.bin");
    CHECK(no_folder.status == 1);
    CHECK(!std::filesystem::exists("/nonexistent/dir/base.bin"));
}

// The amx target's tile GEMM gives the avx512-vnni set's bits (test_kernels_matmul.cpp),
// so a whole model's perplexity under KILN_KERNELS=amx prints the same digits: stories260K
// as Q8_0 and Q4_0 (its 64-row matrices interleaved, their prompt batches on tiles).
// Skipped, with a line, on a CPU without AMX.
TEST_CASE("kiln-perplexity under KILN_KERNELS=amx prints what avx512-vnni prints", "[cli][perplexity][amx]") {
    const auto targets = kiln::kernels::available_kernel_targets();
    if (std::find(targets.begin(), targets.end(), "amx") == targets.end()) {
        WARN("skipped: this machine runs no amx kernel target");
        return;
    }
    const KlSetup s(6000);
    const std::string q4_0 = test::shell_quote((s.dir.path() / "q4_0.gguf").string());
    const auto convert = test::run_tool("kiln-convert", s.f32 + " -o " + q4_0 + " --type q4_0");
    REQUIRE(convert.status == 0);
    for (const std::string& model : {s.q8_0, q4_0}) {
        for (int threads : {1, 2}) {
            const std::string args = fmt::format("-m {} -f {} -c 64 -t {} --score-all", model, s.text, threads);
            const auto amx = test::run_tool("kiln-perplexity", args, "KILN_KERNELS=amx");
            const auto vnni = test::run_tool("kiln-perplexity", args, "KILN_KERNELS=avx512-vnni");
            INFO(model << " threads " << threads << "\n" << amx.err << vnni.err);
            REQUIRE(amx.status == 0);
            REQUIRE(vnni.status == 0);
            CHECK(amx.out.find("PPL = ") != std::string::npos);
            CHECK(amx.out == vnni.out);
        }
    }
}
