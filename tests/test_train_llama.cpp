// Training a Llama: loss, every gradient and 3 AdamW steps against PyTorch
// (tests/reference/make_llama_train_fixture.py: grouped-query attention,
// partial RoPE, untied head); the training graph and the inference session
// are one block builder over two attentions (for the same weights, the
// training graph's logits equal kiln's KV-cache logits from the written file);
// and the written file carries a GGUF vocabulary as it was.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/llama_gguf.h"
#include "engine/train/llama_train_model.h"
#include "engine/train/llama_trainer.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/sample_gguf.h"
#include "support/torch_training.h"

using namespace kiln;
using namespace kiln::train;

namespace {

arch::LlamaParams tiny_llama(int64_t n_vocab, int64_t kv_heads) {
    arch::LlamaParams p;
    p.name = "tiny trained llama";
    p.n_vocab = n_vocab;
    p.n_ctx_train = 12;
    p.dim = 24;
    p.n_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = kv_heads;
    p.ffn_dim = 40;
    p.n_rot = 6;
    return p;
}

std::vector<int32_t> ints(const GgufTensor& t) {
    std::vector<int32_t> v(t.elements);
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(int32_t));
    return v;
}

}  // namespace

TEST_CASE("a tiny Llama's loss, gradients and AdamW steps match PyTorch", "[train_llama]") {
    const GgufFile f = GgufFile::open(test::fixtures_dir() / "train" / "tiny_llama_reference.gguf");
    LlamaTrainOptions o;
    o.model = arch::LlamaParams::read(f);
    o.batch = f.get_int("test.batch");
    const double lr = f.get_number("test.adam.lr");
    o.schedule = LrSchedule{lr, lr, 0, 1000};  // constant
    o.adam.beta1 = static_cast<float>(f.get_number("test.adam.beta1"));
    o.adam.beta2 = static_cast<float>(f.get_number("test.adam.beta2"));
    o.adam.eps = static_cast<float>(f.get_number("test.adam.eps"));
    o.adam.weight_decay = static_cast<float>(f.get_number("test.adam.weight_decay"));
    o.grad_clip = static_cast<float>(f.get_number("test.adam.clip"));
    REQUIRE(o.model.n_kv_heads < o.model.n_heads);  // grouped-query attention
    REQUIRE(o.model.n_rot < o.model.head_dim());     // partial RoPE

    ThreadPool pool(3);
    LlamaTrainer trainer(o, pool);
    ParamModel& model = trainer.parameters();
    for (const ParamTensor& t : model.tensors()) {
        const GgufTensor& src = f.get_tensor(t.name);
        REQUIRE(src.dims == t.dims);
        std::memcpy(model.tensor(t.name), src.data.data(), t.segment.count * sizeof(float));
    }
    const auto tokens = ints(f.get_tensor("tokens"));
    const auto targets = ints(f.get_tensor("targets"));
    const StepResult first = trainer.step_on(tokens, targets);
    CHECK(first.loss == Approx(f.get_number("test.loss")).epsilon(1e-5));

    // Elements below 2% of their tensor's largest are judged against 2% of it
    // (the GPT test's floor is 1%): kiln sums in float32, and with RMSNorm and
    // RoPE the smallest elements of attn_q/attn_k carry ~2e-6 of the tensor's
    // largest as rounding (measured: 1.1e-4 relative at 1.5% of the largest,
    // everything else under 9e-5).
    WARN("largest relative gradient difference "
         << test::require_gradients_match(f, model, trainer.gradients(), 2e-2));

    const GgufValue* losses = f.find("test.adam.losses");
    REQUIRE(losses != nullptr);
    for (int s = 1; s < 3; ++s) {
        const StepResult r = trainer.step_on(tokens, targets);
        CHECK(r.loss == Approx(*losses->as_array()->items[static_cast<size_t>(s)].as_number()).epsilon(1e-5));
    }
    const auto [skipped, total] = test::require_adam_steps_match(f, model);
    CHECK(skipped * 50 < total);  // few (< 2%)
}

TEST_CASE("a llama's training-graph logits equal kiln's from the written file", "[train_llama]") {
    const bool tied = GENERATE(false, true);
    LlamaTrainModel model(tiny_llama(13, 4), tied);
    Rng rng(7);
    model.initialize(rng);
    const int64_t batch = 2, context = 9;
    auto graph = build_llama_train_graph(model, batch, context, false, 0.0f);
    std::vector<int32_t> tokens(static_cast<size_t>(batch * context));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 5 + 3) % 13);
    std::copy(tokens.begin(), tokens.end(), graph->token_data());
    std::fill_n(graph->target_data(), tokens.size(), 0);
    ThreadPool pool(2);
    Executor(graph->graph).run(pool);
    const Node& logits = graph->graph.node(graph->logits);

    test::TempDir dir;
    const auto path = dir.path() / "llama.gguf";
    std::vector<std::string> chars;
    for (int i = 0; i < 13; ++i) chars.push_back(std::string(1, static_cast<char>('a' + i)));
    write_llama_model(path, model, char_tokenizer(chars));
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    CHECK((file->find_tensor("output.weight") == nullptr) == tied);
    const auto lm = load_causal_lm(file);
    for (int64_t b = 0; b < batch; ++b) {
        auto session = lm->new_session(context, 1, Executor::Mode::Fast);
        const std::span<const int32_t> window(tokens.data() + b * context, static_cast<size_t>(context));
        const std::span<const float> got = session->eval(window, pool, true);
        float worst = 0;
        for (int64_t t = 0; t < context; ++t)
            for (int64_t v = 0; v < 13; ++v)
                worst = std::max(worst, std::abs(got[static_cast<size_t>(t * 13 + v)] - logits.row(b * context + t)[v]));
        INFO("window " << b);
        CHECK(worst < 1e-5f);
    }
}

TEST_CASE("a llama trained on a GGUF vocabulary carries its tokenizer keys as they were", "[train_llama]") {
    const GgufFile vocab = GgufFile::open(test::shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf");
    const TrainedTokenizer tokenizer = gguf_tokenizer(vocab);
    REQUIRE(tokenizer.n_vocab == 32000);
    LlamaTrainModel model(tiny_llama(tokenizer.n_vocab, 4), true);
    Rng rng(1);
    model.initialize(rng);
    test::TempDir dir;
    const auto path = dir.path() / "spm.gguf";
    write_llama_model(path, model, tokenizer);
    const GgufFile out = GgufFile::open(path);
    for (const GgufEntry& e : vocab.metadata()) {
        if (!e.key.starts_with("tokenizer.")) continue;
        const GgufValue* v = out.find(e.key);
        INFO(e.key);
        REQUIRE(v != nullptr);
        CHECK(*v == e.value);
    }
    const LoadedLlama back = read_llama_checkpoint(path);
    CHECK(back.tied);
    CHECK(back.tokenizer.n_vocab == 32000);
    CHECK(back.data == model.data());
    CHECK_FALSE(back.training.has_value());
}
