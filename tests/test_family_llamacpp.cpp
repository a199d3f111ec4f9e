// The architectures of llama's family against llama.cpp on the same files
// (tests/reference/make_family_llamacpp_fixtures.py: the PyTorch-checked
// fixtures with stories260K's vocabulary): kiln-perplexity's final estimate
// within 0.1% of llama-perplexity's, and greedy continuations whose bytes
// equal llama-simple's.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

const auto kDir = [] { return test::fixtures_dir() / "llamacpp_family"; };

// expected.txt: "key value" lines, and "<model> ppl <ppl> <unc>" / "<model> greedy <hex>".
struct Expected {
    std::map<std::string, std::string> settings;
    std::map<std::string, double> ppl;
    std::map<std::string, std::string> greedy;
};

Expected read_expected() {
    std::ifstream in(kDir() / "expected.txt");
    REQUIRE(in.good());
    Expected e;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string first, second, third;
        fields >> first >> second;
        if (second == "ppl") {
            fields >> third;
            e.ppl[first] = std::stod(third);
        } else if (second == "greedy") {
            fields >> third;
            e.greedy[first] = third;
        } else {
            e.settings[first] = line.substr(first.size() + 1);
        }
    }
    return e;
}

std::string hex(const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out;
}

}  // namespace

TEST_CASE("family models: kiln-perplexity equals llama-perplexity within 0.1%", "[llama_family][cli][llamacpp_family]") {
    const Expected e = read_expected();
    REQUIRE(e.ppl.size() == 7);
    test::TempDir dir;
    const auto all = test::read_file(test::shared_dir() / "data" / "tinyshakespeare.txt");
    test::write_file(dir.path() / "text.txt", std::span(all).first(std::stoul(e.settings.at("bytes"))));
    for (const auto& [name, want] : e.ppl) {
        INFO(name);
        const std::string model = test::shell_quote((kDir() / (name + ".gguf")).string());
        const auto run = test::run_tool("kiln-perplexity", "-m " + model + " -f " +
                                                               test::shell_quote((dir.path() / "text.txt").string()) +
                                                               " -c " + e.settings.at("ctx") + " -t 1");
        INFO(run.err);
        REQUIRE(run.status == 0);
        double ppl = 0, unc = 0;
        const size_t at = run.err.find("Final estimate: PPL = ");
        REQUIRE(at != std::string::npos);
        REQUIRE(std::sscanf(run.err.c_str() + at, "Final estimate: PPL = %lf +/- %lf", &ppl, &unc) == 2);
        CHECK(ppl == Approx(want).epsilon(1e-3));
    }
}

TEST_CASE("family models: greedy continuations equal llama-simple's", "[llama_family][llamacpp_family]") {
    const Expected e = read_expected();
    REQUIRE(e.greedy.size() == 7);
    const int n_predict = std::stoi(e.settings.at("n_predict"));
    const int64_t n_ctx = std::stoll(e.settings.at("simple_ctx"));
    ThreadPool pool(2);
    for (const auto& [name, want] : e.greedy) {
        INFO(name);
        const auto file = std::make_shared<const GgufFile>(GgufFile::open(kDir() / (name + ".gguf")));
        const auto tokenizer = load_tokenizer(*file);
        const auto model = load_causal_lm(file);
        // llama-simple's context (its LongRoPE choice depends on it).
        auto session = model->new_session(n_ctx, 1, Executor::Mode::Fast);
        std::vector<int32_t> next = tokenizer->encode(e.settings.at("prompt"), tokenizer->add_bos());
        std::string text;
        for (int i = 0; i < n_predict; ++i) {
            const std::span<const float> logits = session->eval(next, pool);
            const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            if (id == tokenizer->eos()) break;
            text += tokenizer->piece(id);
            next = {id};
        }
        CHECK(hex(text) == want);
    }
}

TEST_CASE("kiln stops at any end-of-generation token, and --no-special keeps special tokens as text", "[cli][llamacpp_family]") {
    // llama3's greedy continuation, its first two tokens found in-process.
    const auto source = kDir() / "llama3.gguf";
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(source));
    const auto tokenizer = load_tokenizer(*file);
    const auto model = load_causal_lm(file);
    ThreadPool pool(1);
    auto session = model->new_session(64, 1, Executor::Mode::Fast);
    std::vector<int32_t> next = tokenizer->encode("Once upon a time", true);
    std::vector<int32_t> greedy;
    for (int i = 0; i < 2; ++i) {
        const std::span<const float> logits = session->eval(next, pool);
        greedy.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        next = {greedy.back()};
    }
    REQUIRE(greedy[1] != tokenizer->eos());
    // The same model whose vocabulary names the second token its end-of-turn token.
    test::TempDir dir;
    GgufWriter w;
    for (const GgufEntry& e : file->metadata()) w.set(e.key, e.value);
    w.set("tokenizer.ggml.eot_token_id", GgufValue(static_cast<uint32_t>(greedy[1])));
    for (const GgufTensor& t : file->tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
    const auto edited = dir.path() / "eot.gguf";
    test::write_file(edited, w.to_bytes());
    const std::string args = " -p 'Once upon a time' -n 8 --temp 0 -t 1";
    const auto full = test::run_tool("kiln", "-m " + test::shell_quote(source.string()) + args);
    const auto stopped = test::run_tool("kiln", "-m " + test::shell_quote(edited.string()) + args);
    REQUIRE(full.status == 0);
    REQUIRE(stopped.status == 0);
    INFO(full.out << " | " << stopped.out);
    // One token, then the end of turn: the prompt and the first token's text only.
    const std::string first = "Once upon a time" + tokenizer->piece(greedy[0]);
    CHECK(stopped.out.substr(0, stopped.out.find_last_not_of('\n') + 1) ==
          std::string_view(first).substr(0, first.find_last_not_of('\n') + 1));
    CHECK(full.out.size() > stopped.out.size());

    // "</s>" in a prompt is the EOS token unless --no-special says it is text.
    const auto parsed = test::run_tool("kiln-tokenize", "-m " + test::shell_quote(source.string()) + " -p 'a</s>b'");
    const auto plain = test::run_tool("kiln-tokenize", "-m " + test::shell_quote(source.string()) + " -p 'a</s>b' --no-special");
    REQUIRE(parsed.status == 0);
    REQUIRE(plain.status == 0);
    CHECK(parsed.out.find(" 2 ") != std::string::npos);
    CHECK(parsed.out.size() < plain.out.size());
}
