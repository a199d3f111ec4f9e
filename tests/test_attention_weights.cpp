// kiln-viz attention's numbers: the attention probabilities recorded beside a
// forward pass (engine/models/attention_weights.h), against PyTorch's own
// nn.MultiheadAttention weights on converted torch.nn.Transformer models and a
// float64 PyTorch Llama forward on stories260K
// (tests/reference/make_attention_fixtures.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/models/architectures.h"
#include "engine/models/attention_weights.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/transformer.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/tensor_data.h"

namespace kiln {
namespace {

const GgufFile& expected() {
    static const GgufFile file = GgufFile::open(test::fixtures_dir() / "attention" / "attention_expected.gguf");
    return file;
}

// The largest difference from the fixture's [layers, heads, queries, keys] array.
double max_difference(const AttentionMaps& got, const std::string& name) {
    const GgufTensor& t = expected().get_tensor(name);
    const std::vector<float> want = test::values_of<float>(t);
    REQUIRE(t.dims == std::vector<uint64_t>{static_cast<uint64_t>(got.keys), static_cast<uint64_t>(got.queries),
                                            static_cast<uint64_t>(got.heads), static_cast<uint64_t>(got.layers)});
    REQUIRE(got.p.size() == want.size());
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got.p[i]) - want[i]));
    return worst;
}

// Every row sums to 1; with causal, everything above the diagonal is exactly 0.
void check_rows(const AttentionMaps& m, bool causal) {
    for (int64_t l = 0; l < m.layers; ++l)
        for (int64_t h = 0; h < m.heads; ++h)
            for (int64_t q = 0; q < m.queries; ++q) {
                double sum = 0;
                for (int64_t k = 0; k < m.keys; ++k) {
                    sum += m.at(l, h, q, k);
                    if (causal && k > q) REQUIRE(m.at(l, h, q, k) == 0.0f);
                }
                REQUIRE(sum == Approx(1.0).margin(1e-5));
            }
}

}  // namespace

TEST_CASE("attention weights of torch.nn.Transformer models equal nn.MultiheadAttention's", "[attention][transformer][viz]") {
    ThreadPool pool(2);
    for (const std::string name : {"tiny_postln", "tiny_preln"}) {
        INFO(name);
        const TransformerModel model(std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "transformer" / (name + ".gguf"))));
        const std::vector<int32_t> source = test::values_of<int32_t>(expected().get_tensor(name + ".source"));
        const std::vector<int32_t> target = test::values_of<int32_t>(expected().get_tensor(name + ".target"));
        const Seq2SeqAttention got = record_seq2seq_attention(model, source, target, pool);
        CHECK(got.encoder.layers == 2);
        CHECK(got.encoder.heads == 3);
        CHECK(max_difference(got.encoder, name + ".encoder") < 1e-5);
        CHECK(max_difference(got.decoder, name + ".decoder") < 1e-5);
        CHECK(max_difference(got.cross, name + ".cross") < 1e-5);
        check_rows(got.encoder, false);
        check_rows(got.decoder, true);
        check_rows(got.cross, false);
    }
}

TEST_CASE("attention weights of stories260K equal a float64 PyTorch Llama forward", "[attention][llama][viz]") {
    ThreadPool pool(2);
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
    const std::unique_ptr<CausalLm> lm = load_causal_lm(file);
    const std::vector<int32_t> tokens = test::values_of<int32_t>(expected().get_tensor("stories260K.tokens"));
    const AttentionMaps got = record_decoder_attention(dynamic_cast<const DecoderLm&>(*lm), tokens, pool);
    CHECK(got.layers == 5);
    CHECK(got.heads == 8);
    CHECK(max_difference(got, "stories260K.self") < 1e-5);
    check_rows(got, true);
}

TEST_CASE("attention weights with grouped-query heads and rope_freqs equal a float64 PyTorch forward", "[attention][llama][viz]") {
    ThreadPool pool(2);
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "llama_family" / "llama3.gguf"));
    const std::unique_ptr<CausalLm> lm = load_causal_lm(file);
    const std::vector<int32_t> tokens = test::values_of<int32_t>(expected().get_tensor("llama3.tokens"));
    const AttentionMaps got = record_decoder_attention(dynamic_cast<const DecoderLm&>(*lm), tokens, pool);
    CHECK(got.heads == 4);
    CHECK(max_difference(got, "llama3.self") < 1e-5);
    check_rows(got, true);
}

TEST_CASE("attention weights of Gemma 2 (query scale, soft cap, sliding window) equal its float64 PyTorch forward's",
          "[attention][viz]") {
    ThreadPool pool(2);
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "gemma" / "gemma2.gguf"));
    const std::unique_ptr<CausalLm> lm = load_causal_lm(file);
    const std::vector<int32_t> tokens = test::values_of<int32_t>(expected().get_tensor("gemma2.tokens"));
    const AttentionMaps got = record_decoder_attention(dynamic_cast<const DecoderLm&>(*lm), tokens, pool);
    CHECK(got.layers == 26);
    CHECK(max_difference(got, "gemma2.self") < 1e-5);
}

TEST_CASE("recorded attention keeps Gemma 2's sliding window and soft cap", "[attention][viz]") {
    // gemma2.gguf: a window of 6 on the even layers (make_gemma_fixtures.py).
    ThreadPool pool(2);
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "gemma" / "gemma2.gguf"));
    const std::unique_ptr<CausalLm> lm = load_causal_lm(file);
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 12; ++i) tokens.push_back(1 + i * 3 % 17);
    const AttentionMaps got = record_decoder_attention(dynamic_cast<const DecoderLm&>(*lm), tokens, pool);
    check_rows(got, true);
    for (int64_t h = 0; h < got.heads; ++h) {
        CHECK(got.at(0, h, 11, 5) == 0.0f);  // 6 positions back: outside the window
        CHECK(got.at(0, h, 11, 6) > 0.0f);
        CHECK(got.at(1, h, 11, 0) > 0.0f);   // odd layers see everything
    }
}

TEST_CASE("attention probabilities: scale, soft cap, window and grouped heads by hand", "[attention][viz]") {
    // One query head of width 1 against keys 0, 1, 2: scores q·k·scale.
    const std::vector<float> q{2.0f}, k{0.0f, 1.0f, 2.0f};
    std::vector<float> p;
    attention_probabilities(q, k, 1, 3, HeadLayout{1, 1, 1, 0.5f}, false, 0, p);
    const double z = 1 + std::exp(1.0) + std::exp(2.0);
    CHECK(p[0] == Approx(1 / z).epsilon(1e-6));
    CHECK(p[2] == Approx(std::exp(2.0) / z).epsilon(1e-6));
    p.clear();
    // Soft cap 1: scores 0, 1, 2 become tanh(0), tanh(1), tanh(2).
    attention_probabilities(q, k, 1, 3, HeadLayout{1, 1, 1, 0.5f, 1.0f}, false, 0, p);
    const double zc = 1 + std::exp(std::tanh(1.0)) + std::exp(std::tanh(2.0));
    CHECK(p[1] == Approx(std::exp(std::tanh(1.0)) / zc).epsilon(1e-6));
    p.clear();
    // Causal with a window of 2 at position 2: keys 1 and 2 only.
    attention_probabilities(q, k, 1, 3, HeadLayout{1, 1, 1, 0.5f, 0.0f, 2}, true, 2, p);
    CHECK(p[0] == 0.0f);
    CHECK(p[1] == Approx(std::exp(1.0) / (std::exp(1.0) + std::exp(2.0))).epsilon(1e-6));
    p.clear();
    // Two query heads share one key head.
    attention_probabilities(std::vector<float>{1.0f, -1.0f}, std::vector<float>{0.0f, 3.0f}, 1, 2, HeadLayout{2, 1, 1, 1.0f},
                            false, 0, p);
    REQUIRE(p.size() == 4);
    CHECK(p[1] == Approx(1 / (1 + std::exp(-3.0))).epsilon(1e-6));
    CHECK(p[3] == Approx(1 / (1 + std::exp(3.0))).epsilon(1e-6));
}

}  // namespace kiln

namespace kiln {

TEST_CASE("recorded attention of every decoder-only architecture: causal rows that sum to 1", "[attention][viz]") {
    ThreadPool pool(2);
    const std::filesystem::path f = test::fixtures_dir();
    for (const std::filesystem::path& path :
         {f / "llama_family" / "llama3.gguf", f / "llama_family" / "qwen2.gguf", f / "gemma" / "gemma.gguf",
          f / "phi3" / "phi3.gguf", f / "minicpm" / "tiny_minicpm.gguf", f / "gpt2" / "tiny_bias.gguf"}) {
        INFO(path.string());
        const auto file = std::make_shared<GgufFile>(GgufFile::open(path));
        const std::unique_ptr<CausalLm> lm = load_causal_lm(file);
        const std::vector<int32_t> tokens{1, 5, 9, 2, 7, 3, 8};
        const AttentionMaps got = record_decoder_attention(dynamic_cast<const DecoderLm&>(*lm), tokens, pool);
        CHECK(got.layers == file->get_int(file->get_string("general.architecture") + ".block_count"));
        CHECK(got.queries == 7);
        check_rows(got, true);
    }
}

}  // namespace kiln
