// The gpt2 architecture against an independent float64 PyTorch forward
// (tests/reference/make_gpt2_model_fixtures.py): with and without biases, tied
// and separate heads, prompt logits and greedy continuations through the cache.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/gpt2.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

namespace {

std::shared_ptr<const GgufFile> open_fixture(const std::string& name) {
    return std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "gpt2" / name));
}

const GgufFile& expected() {
    static const GgufFile f = GgufFile::open(test::fixtures_dir() / "gpt2" / "tiny_expected.gguf");
    return f;
}

int32_t argmax(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

TEST_CASE("gpt2 logits and greedy tokens match the PyTorch reference", "[gpt2]") {
    const std::string name = GENERATE(std::string("tiny_bias"), std::string("tiny_nobias"));
    const auto mode = GENERATE(Executor::Mode::Fast, Executor::Mode::Reference);
    const int threads = GENERATE(1, 3);
    INFO(name << " mode " << static_cast<int>(mode) << " threads " << threads);
    const auto model = load_causal_lm(open_fixture(name + ".gguf"));
    CHECK(gpt2_params(dynamic_cast<const DecoderLm&>(*model).arch()).head_dim() == 12);
    ThreadPool pool(threads);
    auto session = model->new_session(model->info().n_ctx_train, 1, mode);

    const auto tokens = test::values_of<int32_t>(expected().get_tensor(name + ".tokens"));
    const auto want = test::values_of<float>(expected().get_tensor(name + ".logits"));
    const std::span<const float> got = session->eval(tokens, pool, /*all_logits=*/true);
    REQUIRE(got.size() == want.size());
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    CHECK(worst < 1e-4f);

    // Greedy continuation, one token at a time through the KV cache.
    session->reset();
    std::span<const float> logits = session->eval(tokens, pool);
    std::vector<int32_t> greedy;
    for (int i = 0; i < 16; ++i) {
        greedy.push_back(argmax(logits));
        logits = session->eval(std::span(&greedy.back(), 1), pool);
    }
    CHECK(greedy == test::values_of<int32_t>(expected().get_tensor(name + ".greedy")));
}

TEST_CASE("gpt2 refuses a context longer than its position table", "[gpt2]") {
    const auto model = load_causal_lm(open_fixture("tiny_bias.gguf"));
    CHECK_THROWS_WITH(model->new_session(model->info().n_ctx_train + 1, 1, Executor::Mode::Fast),
                      Catch::Contains("positions this gpt2 model has"));
    ThreadPool pool(1);
    auto session = model->new_session(4, 1, Executor::Mode::Fast);
    const std::vector<int32_t> five{1, 2, 3, 4, 5};
    CHECK_THROWS_WITH(session->eval(five, pool), Catch::Contains("do not fit the context"));
    const std::vector<int32_t> bad{1, 999};
    CHECK_THROWS_WITH(session->eval(bad, pool), Catch::Contains("outside the vocabulary"));
}
