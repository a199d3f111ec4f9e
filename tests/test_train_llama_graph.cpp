// The Llama training graph and the Llama inference session are one block
// builder (engine/models/llama_block.h) over two attentions: for the same
// weights, the training graph's logits of a window equal the logits kiln
// computes through its KV cache from the file the trainer writes. And that
// file carries a GGUF vocabulary as it was.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/llama_gguf.h"
#include "engine/train/llama_train_model.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/sample_gguf.h"

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

}  // namespace

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
