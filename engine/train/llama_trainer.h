#pragma once
// Training a Llama: the decoder-only trainer of causal_lm_trainer.h over a
// LlamaTrainModel and its graph (the shared llama block builder).
#include <memory>

#include "engine/runtime/thread_pool.h"
#include "engine/train/causal_lm_trainer.h"
#include "engine/train/llama_gguf.h"
#include "engine/train/llama_train_model.h"

namespace kiln::train {

struct LlamaTrainOptions : CausalTrainOptions {
    arch::LlamaParams model;  // n_ctx_train: tokens per window
    bool tied = false;        // the head is the token embedding (no output.weight)
};

class LlamaTrainer : public CausalLmTrainer {
public:
    // A fresh model initialized from options.seed.
    LlamaTrainer(const LlamaTrainOptions& options, ThreadPool& pool);

    // Continues from a checkpoint (its weights, step, moments and generator state).
    void restore(const LoadedLlama& checkpoint) { CausalLmTrainer::restore(checkpoint.data, checkpoint.training); }

    const LlamaTrainModel& model() const noexcept { return static_cast<const LlamaTrainModel&>(parameters()); }
};

}  // namespace kiln::train
