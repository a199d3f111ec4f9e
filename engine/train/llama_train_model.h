#pragma once
// A trainable Llama (the llama descriptor's tensors, formats/arch/llama_arch.h)
// in one flat F32 buffer, and its training graph: the shared llama block
// builder (engine/models/llama_block.h) over sequence attention, so what trains
// here is exactly what kiln and llama.cpp run.
#include <cstdint>
#include <memory>

#include "engine/train/causal_train_graph.h"
#include "engine/train/param_model.h"
#include "engine/train/rng.h"
#include "formats/arch/llama_arch.h"

namespace kiln::train {

class LlamaTrainModel : public ParamModel {
public:
    // tied: no output.weight, the head is token_embd (as llama.cpp reads it).
    LlamaTrainModel(arch::LlamaParams params, bool tied, bool decay_embeddings = false);

    // GPT-2's initialization, as nanoGPT and llama2.c's model.py: matrices and the
    // embedding N(0, 0.02), the two projections into the residual stream
    // (attn_output, ffn_down) N(0, 0.02 / sqrt(2 layers)), norms 1.
    void initialize(Rng& rng);

    const arch::LlamaParams& params() const noexcept { return params_; }
    bool tied() const noexcept { return tied_; }

private:
    arch::LlamaParams params_;
    bool tied_;
};

std::unique_ptr<CausalTrainGraph> build_llama_train_graph(LlamaTrainModel& model, int64_t batch, int64_t context,
                                                          bool training, float dropout);

}  // namespace kiln::train
