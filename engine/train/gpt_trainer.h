#pragma once
// Training the character GPT: the decoder-only trainer of causal_lm_trainer.h
// over a GptModel (gpt2 layout) and its graph. Everything a resumed run needs
// is in training_state()/restore().
#include <memory>

#include "engine/runtime/thread_pool.h"
#include "engine/train/causal_lm_trainer.h"
#include "engine/train/gpt_gguf.h"
#include "engine/train/gpt_model.h"

namespace kiln::train {

struct TrainOptions : CausalTrainOptions {
    GptConfig model;
};

class GptTrainer : public CausalLmTrainer {
public:
    // A fresh model initialized from options.seed.
    GptTrainer(const TrainOptions& options, ThreadPool& pool);

    // Continues from a checkpoint (its weights, step, moments and generator state).
    void restore(const LoadedGpt& checkpoint) { CausalLmTrainer::restore(checkpoint.data, checkpoint.training); }

    GptModel& model() noexcept { return static_cast<GptModel&>(parameters()); }
    const GptModel& model() const noexcept { return static_cast<const GptModel&>(parameters()); }
    const TrainOptions& options() const noexcept { return options_; }

private:
    TrainOptions options_;
};

}  // namespace kiln::train
