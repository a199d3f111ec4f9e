// The Llama model end to end on stories260K against the PyTorch reference
// (tests/reference/make_llama_fixtures.py): logits of batched prompts, greedy
// continuations decoded one token at a time through the KV cache, and the
// logits far into those continuations.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/llama.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

namespace {

struct Fixture {
    std::shared_ptr<const GgufFile> model_file =
        std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
    std::unique_ptr<CausalLm> model = load_causal_lm(model_file);
    GgufFile ref = GgufFile::open(test::fixtures_dir() / "llama" / "stories260K_reference.gguf");
    int64_t prompts() const { return ref.get_int("fixture.prompts"); }
    std::vector<int32_t> ints(const std::string& name) const { return test::values_of<int32_t>(ref.get_tensor(name)); }
    std::vector<float> floats(const std::string& name) const { return test::values_of<float>(ref.get_tensor(name)); }
};

const Fixture& fixture() {
    static const Fixture f;
    return f;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

TEST_CASE("stories260K hyper-parameters come from the GGUF metadata", "[llama]") {
    const arch::LlamaParams& c = llama_params(dynamic_cast<const DecoderLm&>(*fixture().model).arch());
    CHECK(c.n_vocab == 512);
    CHECK(c.dim == 64);
    CHECK(c.n_layers == 5);
    CHECK(c.n_heads == 8);
    CHECK(c.n_kv_heads == 4);
    CHECK(c.head_dim() == 8);
    CHECK(c.ffn_dim == 172);
    CHECK(c.n_rot == 8);
}

TEST_CASE("batched prompt logits match PyTorch within 1e-4", "[llama]") {
    const Fixture& f = fixture();
    ThreadPool pool(2);
    for (int64_t p = 0; p < f.prompts(); ++p) {
        const std::string name = fmt::format("p{}.", p);
        const auto tokens = f.ints(name + "tokens");
        auto ctx = f.model->new_session(256, 1, Executor::Mode::Fast);
        const auto logits = ctx->eval(tokens, pool, /*all_logits=*/true);
        INFO("prompt " << p);
        CHECK(max_abs_diff(logits, f.floats(name + "logits")) < 1e-4f);
    }
}

TEST_CASE("greedy decoding through the KV cache reproduces PyTorch's 100 tokens", "[llama]") {
    const Fixture& f = fixture();
    ThreadPool pool(2);
    for (int64_t p = 0; p < f.prompts(); ++p) {
        const std::string name = fmt::format("p{}.", p);
        const auto tokens = f.ints(name + "tokens");
        const auto expected = f.ints(name + "greedy");
        const auto tail_logits = f.floats(name + "greedy_logits");
        const size_t vocab = static_cast<size_t>(f.model->info().n_vocab);
        const size_t tail = tail_logits.size() / vocab;
        auto ctx = f.model->new_session(256, 1, Executor::Mode::Fast);
        auto logits = ctx->eval(tokens, pool);
        std::vector<int32_t> generated;
        for (size_t step = 0; step < expected.size(); ++step) {
            if (step >= expected.size() - tail) {
                const std::span<const float> want(tail_logits.data() + (step - (expected.size() - tail)) * vocab, vocab);
                INFO("prompt " << p << " step " << step);
                CHECK(max_abs_diff(logits, want) < 1e-4f);
            }
            generated.push_back(argmax(logits));
            if (step + 1 < expected.size()) logits = ctx->eval(std::span(&generated.back(), 1), pool);
        }
        INFO("prompt " << p);
        CHECK(generated == expected);
    }
}

TEST_CASE("results with 2 or 3 threads equal the 1-thread results exactly", "[llama][threads]") {
    const Fixture& f = fixture();
    const auto tokens = f.ints("p3.tokens");
    std::vector<float> one;
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        auto ctx = f.model->new_session(128, 1, Executor::Mode::Fast);
        auto logits = ctx->eval(tokens, pool, true);
        std::vector<float> all(logits.begin(), logits.end());
        for (int step = 0; step < 8; ++step) {
            const int32_t next = argmax(logits.subspan(logits.size() - 512));
            logits = ctx->eval(std::span(&next, 1), pool);
            all.insert(all.end(), logits.begin(), logits.end());
        }
        if (threads == 1) one = all;
        else CHECK(all == one);
    }
}

TEST_CASE("a pool that changes its thread count between steps gives the 1-thread bits", "[llama][threads]") {
    // What a pool following free CPUs does (thread_governor.h): the count may
    // change after any run, and the logits must not notice.
    const Fixture& f = fixture();
    const auto tokens = f.ints("p3.tokens");
    std::vector<std::vector<float>> runs;
    for (const std::vector<int>& counts : {std::vector<int>{1}, std::vector<int>{3, 1, 2, 3, 2, 1, 3, 2, 1}}) {
        ThreadPool pool(3);
        size_t step_index = 0;
        const auto next_count = [&] { pool.set_active(counts[step_index++ % counts.size()]); };
        next_count();
        auto ctx = f.model->new_session(128, 1, Executor::Mode::Fast);
        auto logits = ctx->eval(tokens, pool, true);
        std::vector<float> all(logits.begin(), logits.end());
        for (int step = 0; step < 8; ++step) {
            const int32_t next = argmax(logits.subspan(logits.size() - 512));
            next_count();
            logits = ctx->eval(std::span(&next, 1), pool);
            all.insert(all.end(), logits.begin(), logits.end());
        }
        runs.push_back(std::move(all));
    }
    CHECK(runs[1] == runs[0]);
}

TEST_CASE("the scalar reference path agrees with the fast path", "[llama]") {
    const Fixture& f = fixture();
    ThreadPool pool(1);
    const auto tokens = f.ints("p2.tokens");
    auto fast = f.model->new_session(64, 1, Executor::Mode::Fast);
    auto reference = f.model->new_session(64, 1, Executor::Mode::Reference);
    const auto a = fast->eval(tokens, pool, true);
    const std::vector<float> kept(a.begin(), a.end());
    const auto b = reference->eval(tokens, pool, true);
    CHECK(max_abs_diff(kept, b) < 1e-4f);
}

TEST_CASE("evaluation refuses what does not fit", "[llama]") {
    const Fixture& f = fixture();
    ThreadPool pool(1);
    auto ctx = f.model->new_session(4, 1, Executor::Mode::Fast);
    const std::vector<int32_t> five{1, 2, 3, 4, 5};
    CHECK_THROWS_WITH(ctx->eval(five, pool), Catch::Contains("do not fit the context"));
    const std::vector<int32_t> bad{1, 512};
    CHECK_THROWS_WITH(ctx->eval(bad, pool), Catch::Contains("token id 512 is outside the vocabulary of 512"));
    CHECK(ctx->n_past(0) == 0);
    const std::vector<int32_t> empty;
    CHECK_THROWS_WITH(ctx->eval(empty, pool), Catch::Contains("no tokens"));
}
