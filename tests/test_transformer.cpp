// The encoder-decoder Transformer against PyTorch's own nn.Transformer
// (tests/reference/make_transformer_model_fixtures.py): post-LN and pre-LN,
// decoder logits at every target position, padded batches, and slots that
// share one source (as beam search uses them).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/models/transformer.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

namespace {

const GgufFile& expected() {
    static const GgufFile f = GgufFile::open(test::fixtures_dir() / "transformer" / "tiny_expected.gguf");
    return f;
}

std::vector<int32_t> ints(const std::string& name) { return test::values_of<int32_t>(expected().get_tensor(name)); }
std::vector<float> floats(const std::string& name) { return test::values_of<float>(expected().get_tensor(name)); }

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

TransformerModel open_model(const std::string& name) {
    return TransformerModel(std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "transformer" / name)));
}

}  // namespace

TEST_CASE("transformer decoder logits match PyTorch's nn.Transformer", "[transformer]") {
    const std::string name = GENERATE(std::string("tiny_postln"), std::string("tiny_preln"));
    const auto mode = GENERATE(Executor::Mode::Fast, Executor::Mode::Reference);
    INFO(name << " mode " << static_cast<int>(mode));
    const TransformerModel model = open_model(name + ".gguf");
    CHECK(model.config().norm_first == (name == "tiny_preln"));
    ThreadPool pool(2);
    TransformerSession session(model, 1, 16, 1, 16, mode);
    for (int c = 0; c < 3; ++c) {
        const std::string p = fmt::format("{}.{}.", name, c);
        const std::vector<std::vector<int32_t>> sources{ints(p + "source")};
        session.encode(sources, pool);
        const auto target = ints(p + "target");
        const std::vector<int32_t> slots(target.size(), 0);
        // The whole target in one batch, then again one token at a time through the cache.
        CHECK(max_abs_diff(session.decode(target, slots, pool), floats(p + "logits")) < 1e-4f);
        session.encode(sources, pool);
        const auto want = floats(p + "logits");
        const auto n_vocab = static_cast<size_t>(model.config().n_vocab);
        for (size_t i = 0; i < target.size(); ++i) {
            const auto step = session.decode(std::span(&target[i], 1), std::span(&slots[i], 1), pool);
            CHECK(max_abs_diff(step, std::span(want).subspan(i * n_vocab, n_vocab)) < 1e-4f);
        }
    }
}

TEST_CASE("transformer sources padded into one batch give the results of separate runs", "[transformer]") {
    const std::string name = GENERATE(std::string("tiny_postln"), std::string("tiny_preln"));
    const TransformerModel model = open_model(name + ".gguf");
    ThreadPool pool(2);
    TransformerSession session(model, 2, 16, 2, 16);
    const std::vector<std::vector<int32_t>> sources{ints(name + ".0.source"), ints(name + ".2.source")};
    REQUIRE(sources[1].size() < sources[0].size());
    session.encode(sources, pool);
    const auto target = ints(name + ".0.target");
    std::vector<int32_t> tokens, slots;
    for (int32_t s = 0; s < 2; ++s)
        for (int32_t t : target) {
            tokens.push_back(t);
            slots.push_back(s);
        }
    const auto got = session.decode(tokens, slots, pool);
    // Against PyTorch's padded batch, and against the unpadded single runs.
    CHECK(max_abs_diff(got, floats(name + ".batch.logits")) < 1e-4f);
    const auto n = target.size() * static_cast<size_t>(model.config().n_vocab);
    CHECK(max_abs_diff(got.subspan(0, n), floats(name + ".0.logits")) < 1e-4f);
    CHECK(max_abs_diff(got.subspan(n, n), floats(name + ".2.logits")) < 1e-4f);
    for (float v : got) REQUIRE(std::isfinite(v));
}

TEST_CASE("transformer slots can share a source and fork", "[transformer]") {
    const TransformerModel model = open_model("tiny_postln.gguf");
    ThreadPool pool(1);
    TransformerSession session(model, 1, 16, 3, 16);
    const std::vector<std::vector<int32_t>> sources{ints("tiny_postln.0.source")};
    session.encode(sources, pool);
    const auto target = ints("tiny_postln.0.target");
    const auto want = floats("tiny_postln.0.logits");
    const auto n_vocab = static_cast<size_t>(model.config().n_vocab);
    // Slot 0 decodes three tokens; slots 1 and 2 become copies of it and decode the fourth.
    const std::vector<int32_t> first(target.begin(), target.begin() + 3), zeros(3, 0);
    session.decode(first, zeros, pool);
    const std::vector<int32_t> parents{0, 0, 0};
    session.reorder(parents);
    const std::vector<int32_t> next(3, target[3]), slots{0, 1, 2};
    const auto got = session.decode(next, slots, pool);
    for (size_t s = 0; s < 3; ++s)
        CHECK(max_abs_diff(got.subspan(s * n_vocab, n_vocab), std::span(want).subspan(3 * n_vocab, n_vocab)) < 1e-4f);
}

TEST_CASE("transformer bad input: long or empty sources, unknown tokens", "[transformer]") {
    const TransformerModel model = open_model("tiny_postln.gguf");
    ThreadPool pool(1);
    TransformerSession session(model, 1, 8, 1, 8);
    const std::vector<std::vector<int32_t>> too_long{std::vector<int32_t>(9, 5)};
    CHECK_THROWS_WITH(session.encode(too_long, pool), Catch::Contains("longer than the encoder's context of 8"));
    const std::vector<std::vector<int32_t>> empty{{}};
    CHECK_THROWS_WITH(session.encode(empty, pool), Catch::Contains("source 0 is empty"));
    const std::vector<std::vector<int32_t>> unknown{{3, 999}};
    CHECK_THROWS_WITH(session.encode(unknown, pool), Catch::Contains("outside the vocabulary"));
    const std::vector<int32_t> bos{model.config().bos}, slot{0};
    CHECK_THROWS_WITH(session.decode(bos, slot, pool), Catch::Contains("no encoded source"));
    CHECK_THROWS_WITH(TransformerSession(model, 1, 100, 1, 8), Catch::Contains("positions of this model"));
}
