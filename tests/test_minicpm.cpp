// MiniCPM (llama.cpp's `minicpm`: llama's block with three scalings) against
// an independent PyTorch forward (tests/reference/make_minicpm_fixture.py):
// logits of a prompt, batched and token by token through the KV cache.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

TEST_CASE("minicpm logits match PyTorch, batched and through the KV cache", "[minicpm]") {
    const auto dir = test::fixtures_dir() / "minicpm";
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(dir / "tiny_minicpm.gguf"));
    const GgufFile ref = GgufFile::open(dir / "tiny_minicpm_reference.gguf");
    const auto tokens = test::values_of<int32_t>(ref.get_tensor("tokens"));
    const auto want = test::values_of<float>(ref.get_tensor("logits"));
    CHECK(check_model(*file) == "minicpm");
    const auto model = load_causal_lm(file);
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    REQUIRE(want.size() == tokens.size() * vocab);
    const auto mode = GENERATE(Executor::Mode::Fast, Executor::Mode::Reference);
    const int threads = GENERATE(1, 2);
    INFO("mode " << static_cast<int>(mode) << " threads " << threads);
    ThreadPool pool(threads);
    auto batched = model->new_session(32, 1, mode);
    const std::span<const float> all = batched->eval(tokens, pool, true);
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(all[i] - want[i]));
    CHECK(worst < 1e-4f);
    auto stepped = model->new_session(32, 1, mode);
    worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const std::span<const float> one = stepped->eval(std::span(&tokens[t], 1), pool);
        for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::abs(one[v] - want[t * vocab + v]));
    }
    CHECK(worst < 1e-4f);
}

TEST_CASE("minicpm without one of its scales is refused, naming the key", "[minicpm]") {
    const GgufFile fixture = GgufFile::open(test::fixtures_dir() / "minicpm" / "tiny_minicpm.gguf");
    for (const char* dropped : {"minicpm.embedding_scale", "minicpm.residual_scale", "minicpm.logit_scale"}) {
        GgufWriter w;
        for (const GgufEntry& e : fixture.metadata())
            if (e.key != dropped) w.set(e.key, e.value);
        for (const GgufTensor& t : fixture.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
        const std::vector<std::byte> bytes = w.to_bytes();
        const auto file = std::make_shared<const GgufFile>(GgufFile::parse(bytes, "no-scale.gguf"));
        INFO(dropped);
        CHECK_THROWS_WITH(load_causal_lm(file), Catch::Contains(std::string("metadata key '") + dropped + "' is missing"));
    }
}
