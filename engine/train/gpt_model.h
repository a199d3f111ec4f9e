#pragma once
// A trainable GPT in the gpt2 layout of docs/architectures.md, gpt2 (pre-LN blocks, learned
// positions, GELU tanh, optional biases, tied head): every parameter lives in
// one flat F32 buffer under its GGUF name and ggml shape, so the optimizer
// walks one array and export copies tensors out as they are.
//
// The training graph runs `batch` sequences of `context` tokens as rows
// [width, batch * context] through the engine's ops, ends in the mean
// cross-entropy, and (for training) carries the backward pass to every parameter.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/train/adamw.h"
#include "engine/train/causal_train_graph.h"
#include "engine/train/param_model.h"
#include "engine/train/rng.h"
#include "formats/arch/gpt2_arch.h"

namespace kiln::train {

struct GptConfig {
    int64_t vocab = 0;
    int64_t context = 64;   // positions (n_ctx)
    int64_t width = 128;    // d
    int64_t layers = 4;
    int64_t heads = 4;
    int64_t ffn = 512;      // f, 4 d by default
    bool bias = false;      // nanoGPT's bias=False: no bias tensors
    float eps = 1e-5f;

    // kiln::Error for sizes that do not fit (width not divisible by heads, ...).
    void validate() const;
    // The trainer's configuration of a gpt2 file's hyper-parameters; bias: the file has linear biases.
    static GptConfig of(const arch::Gpt2Params& p, bool bias);
};

class GptModel : public ParamModel {
public:
    explicit GptModel(GptConfig config, bool decay_embeddings = false);

    // nanoGPT's initialization: weights and embeddings N(0, 0.02), the two
    // projections into the residual stream N(0, 0.02 / sqrt(2 layers)),
    // norms 1, biases 0.
    void initialize(Rng& rng);

    const GptConfig& config() const noexcept { return config_; }
    // The same model in the gpt2 architecture's terms (formats/arch/gpt2_arch.h).
    arch::Gpt2Params params() const;

private:
    GptConfig config_;
};

// The GPT's graphs are the decoder-only training graphs of causal_train_graph.h.
using GptGraph = CausalTrainGraph;

// Builds (and plans) the graph. training: with dropout (p > 0) and the backward pass.
std::unique_ptr<GptGraph> build_gpt_graph(GptModel& model, int64_t batch, int64_t context, bool training,
                                          float dropout);

}  // namespace kiln::train
