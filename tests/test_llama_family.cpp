// llama's family and its relatives as llama.cpp's files describe them, against
// independent PyTorch forwards written from Hugging Face's modelling code
// (tests/reference/make_llama_family_fixtures.py, make_gemma_fixtures.py,
// make_phi3_fixtures.py):
// qwen2 (q/k/v biases, NEOX rope), Llama 3.1's rope_freqs, linear and YaRN rope
// scaling, a head size set by attention.key_length, llama's optional biases;
// gemma and gemma2 (scaled embeddings, post norms, soft caps, sliding windows);
// phi3 (fused projections, a window on every layer, LongRoPE factors).
// Logits of a 40-token prompt, batched and token by token through the KV
// cache, within 1e-4. Fixture names are paths under tests/fixtures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/models/architectures.h"
#include "engine/core/error.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

TEST_CASE("llama family: logits match PyTorch, batched and through the KV cache", "[llama][llama_family]") {
    const auto [name, arch] = GENERATE(table<std::string, std::string>({{"llama_family/qwen2", "qwen2"},
                                                                       {"llama_family/llama3", "llama"},
                                                                       {"llama_family/llama_linear", "llama"},
                                                                       {"llama_family/llama_yarn", "llama"},
                                                                       {"gemma/gemma2", "gemma2"},
                                                                       {"gemma/gemma", "gemma"},
                                                                       {"phi3/phi3", "phi3"},
                                                                       {"phi3/phi3_longrope", "phi3"}}));
    const auto dir = test::fixtures_dir();
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(dir / (name + ".gguf")));
    const GgufFile ref = GgufFile::open(dir / (name + "_reference.gguf"));
    const auto tokens = test::values_of<int32_t>(ref.get_tensor("tokens"));
    const auto want = test::values_of<float>(ref.get_tensor("logits"));
    CHECK(check_model(*file) == arch);
    const auto model = load_causal_lm(file);
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    REQUIRE(want.size() == tokens.size() * vocab);
    const auto mode = GENERATE(Executor::Mode::Fast, Executor::Mode::Reference);
    const int threads = GENERATE(1, 2);
    INFO(name << " mode " << static_cast<int>(mode) << " threads " << threads);
    ThreadPool pool(threads);
    auto batched = model->new_session(64, 1, mode);
    const std::span<const float> all = batched->eval(tokens, pool, true);
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(all[i] - want[i]));
    CHECK(worst < 1e-4f);
    auto stepped = model->new_session(64, 1, mode);
    worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const std::span<const float> one = stepped->eval(std::span(&tokens[t], 1), pool);
        for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::abs(one[v] - want[t * vocab + v]));
    }
    CHECK(worst < 1e-4f);
}

TEST_CASE("phi3: LongRoPE's short factors while the context stays within the original one", "[llama_family]") {
    const auto dir = test::fixtures_dir() / "phi3";
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(dir / "phi3_longrope.gguf"));
    const GgufFile ref = GgufFile::open(dir / "phi3_longrope_reference.gguf");
    const auto tokens = test::values_of<int32_t>(ref.get_tensor("tokens"));
    const auto want = test::values_of<float>(ref.get_tensor("logits_short"));
    const auto model = load_causal_lm(file);
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    const size_t n = want.size() / vocab;
    REQUIRE(n == 24);
    ThreadPool pool(2);
    // 32 positions: the original context, so llama.cpp (and kiln) take the short factors.
    auto session = model->new_session(32, 1, Executor::Mode::Fast);
    const std::span<const float> all = session->eval(std::span(tokens.data(), n), pool, true);
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(all[i] - want[i]));
    CHECK(worst < 1e-4f);
}

namespace {

// The fixture `name` rewritten: metadata entries replaced or added by `set`,
// keys dropped, one f32 tensor appended, the first value of one tensor zeroed;
// returns the loader's error ("(loaded)" when it loads).
struct Rewrite {
    std::vector<GgufEntry> set = {};
    std::vector<std::string> drop_keys = {};
    std::string extra_tensor = {};  // an f32 vector of extra_size ones under this name
    std::string zero_first_value_of = {};
    uint64_t extra_size = 4;
};

std::string load_error(const std::string& name, const Rewrite& r) {
    const GgufFile fixture = GgufFile::open(test::fixtures_dir() / (name + ".gguf"));
    GgufWriter w;
    for (const GgufEntry& e : fixture.metadata())
        if (std::find(r.drop_keys.begin(), r.drop_keys.end(), e.key) == r.drop_keys.end()) w.set(e.key, e.value);
    for (const GgufEntry& e : r.set) w.set(e.key, e.value);
    std::vector<std::vector<std::byte>> keep;
    for (const GgufTensor& t : fixture.tensors()) {
        keep.emplace_back(t.data.begin(), t.data.end());
        if (t.name == r.zero_first_value_of) std::fill(keep.back().begin(), keep.back().begin() + 4, std::byte{0});
        w.add_tensor(t.name, t.type, t.dims, keep.back());
    }
    std::vector<std::byte> ones(r.extra_size * sizeof(float));
    const float one = 1.0f;
    for (uint64_t i = 0; i < r.extra_size; ++i) std::memcpy(ones.data() + i * sizeof(float), &one, sizeof(float));
    if (!r.extra_tensor.empty()) w.add_tensor(r.extra_tensor, DType::F32, {r.extra_size}, ones);
    const std::vector<std::byte> bytes = w.to_bytes();
    const auto file = std::make_shared<const GgufFile>(GgufFile::parse(bytes, name + "-edited.gguf"));
    try {
        load_causal_lm(file);
    } catch (const Error& e) {
        return e.what();
    }
    return "(loaded)";
}

}  // namespace

TEST_CASE("llama family: what kiln does not implement is refused, naming it", "[llama][llama_family]") {
    using V = GgufValue;
    const std::string llama3 = "llama_family/llama3", qwen2 = "llama_family/qwen2",
                      llama_linear = "llama_family/llama_linear", gemma2 = "gemma/gemma2", gemma = "gemma/gemma",
                      phi3 = "phi3/phi3";
    const struct {
        std::string fixture;
        Rewrite rewrite;
        std::string message;
    } cases[] = {
        {phi3, {{}, {"phi3.attention.sliding_window"}}, "phi3.attention.sliding_window is missing"},
        {phi3, {{{"phi3.attention.key_length", V(uint32_t{12})}, {"phi3.attention.value_length", V(uint32_t{12})}}}, "phi3's heads are width/heads = 8"},
        {phi3, {{}, {}, "rope_factors_long.weight"}, "tensor 'rope_factors_long.weight' without 'rope_factors_short.weight'"},
        {phi3, {{}, {}, "blk.0.attn_q.weight", "", 32 * 32}, "tensor 'blk.0.attn_q.weight' is not used by kiln's phi3"},
        {phi3, {{{"phi3.expert_count", V(uint32_t{16})}}}, "mixture-of-experts"},
        {llama3, {{{"llama.attention.sliding_window", V(uint32_t{16})}}}, "metadata key 'llama.attention.sliding_window' is not implemented"},
        {llama3, {{{"llama.attn_logit_softcapping", V(30.0f)}}}, "metadata key 'llama.attn_logit_softcapping' is not implemented"},
        {qwen2, {{{"qwen2.final_logit_softcapping", V(30.0f)}}}, "metadata key 'qwen2.final_logit_softcapping' is not implemented"},
        {llama3, {{{"llama.expert_count", V(uint32_t{8})}}}, "mixture-of-experts"},
        {llama3, {{{"llama.attention.causal", V(false)}}}, "non-causal attention"},
        {llama3, {{{"llama.rope.scaling.type", V(std::string("longrope"))}}}, "'longrope': kiln implements rope scaling"},
        {llama3, {{{"llama.vocab_size", V(uint32_t{30})}}}, "llama.vocab_size is 30"},
        {llama_linear, {{{"llama.attention.value_length", V(uint32_t{16})}}}, "differs from llama.attention.value_length"},
        {llama3, {{}, {}, "blk.0.attn_q_norm.weight"}, "tensor 'blk.0.attn_q_norm.weight' is not used by kiln's llama"},
        {qwen2, {{}, {}, "blk.1.attn_output.bias", "", 32}, "'blk.1.attn_output.bias' is not part of qwen2"},
        {llama3, {{}, {}, "", "rope_freqs.weight"}, "rope frequency factors must be finite and positive"},
        {gemma2, {{{"gemma2.block_count", V(uint32_t{3})}}}, "is known only for 26, 42 and 46 layers"},
        {gemma2, {{{"gemma2.attn_logit_softcapping", V(0.0f)}}}, "gemma2.attn_logit_softcapping is 0"},
        {gemma2, {{{"gemma2.attention.sliding_window", V(int32_t{-4})}}}, "gemma2.attention.sliding_window is -4"},
        {gemma, {{{"gemma.attention.sliding_window", V(uint32_t{16})}}}, "metadata key 'gemma.attention.sliding_window' is not implemented"},
        {gemma, {{{"gemma.final_logit_softcapping", V(30.0f)}}}, "metadata key 'gemma.final_logit_softcapping' is not implemented"},
        {gemma2, {{}, {}, "output.weight", "", 32 * 29}, "tensor 'output.weight' is not used by kiln's gemma2"},
        {gemma, {{}, {}, "blk.0.post_ffw_norm.weight", "", 32}, "tensor 'blk.0.post_ffw_norm.weight' is not used by kiln's gemma"},
    };
    for (const auto& c : cases) {
        INFO(c.fixture << ": expecting " << c.message);
        const std::string got = load_error(c.fixture, c.rewrite);
        CHECK_THAT(got, Catch::Contains(c.message));
        CHECK(got.find('\n') == std::string::npos);
    }
    // The untouched fixtures load.
    for (const std::string& name : {llama3, qwen2, gemma2, gemma, phi3}) CHECK(load_error(name, {}) == "(loaded)");
}
