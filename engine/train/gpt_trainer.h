#pragma once
// The training loop's state and one step of it: sample windows, run the
// forward + backward graph (accumulating gradients over micro-batches), clip
// by global norm, AdamW. Evaluation runs a forward-only graph on the same
// parameters. Everything a resumed run needs is in checkpoint()/restore().
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/adamw.h"
#include "engine/train/char_corpus.h"
#include "engine/train/gpt_gguf.h"
#include "engine/train/gpt_model.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"

namespace kiln::train {

struct TrainOptions {
    GptConfig model;
    int64_t batch = 12;
    int64_t accumulation = 1;   // micro-batches per optimizer step
    LrSchedule schedule;
    AdamWOptions adam;
    float grad_clip = 1.0f;     // global norm; 0 = off
    float dropout = 0.0f;
    bool decay_embeddings = false;
    uint64_t seed = 1337;

    OptimizerOptions optimizer() const { return {schedule, adam, grad_clip}; }
};

class GptTrainer {
public:
    // A fresh model initialized from options.seed.
    GptTrainer(const TrainOptions& options, ThreadPool& pool);

    // Continues from a checkpoint (its step, moments and generator state).
    void restore(const LoadedGpt& checkpoint);

    // One optimizer step over `train` data. A non-finite loss or gradient norm
    // throws kiln::Error("train") before the parameters are touched.
    StepResult step(const std::vector<int32_t>& train);
    // One optimizer step on a given batch (batch × context tokens and targets;
    // targets of -1 are ignored). Only without accumulation.
    StepResult step_on(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets);

    // Mean loss over `batches` windows of `data`, drawn from a generator seeded
    // by (seed, step), so evaluation never disturbs the training batches.
    double evaluate(const std::vector<int32_t>& data, int64_t batches);

    int64_t steps_done() const noexcept { return optimizer_->steps_done(); }
    GptModel& model() noexcept { return *model_; }
    TrainingState training_state() const;
    const TrainOptions& options() const noexcept { return options_; }
    // The last step's gradients, flat like the model: averaged over the
    // micro-batches, before clipping.
    const std::vector<float>& gradients() const noexcept { return optimizer_->gradients(); }

private:
    // Runs the training graph on the batch in its inputs; adds the gradients up.
    void run_micro_batch(int64_t micro, bool first);

    TrainOptions options_;
    ThreadPool& pool_;
    std::unique_ptr<GptModel> model_;
    std::unique_ptr<GptGraph> train_graph_, eval_graph_;
    std::unique_ptr<Executor> train_exec_, eval_exec_;
    std::unique_ptr<Optimizer> optimizer_;
    Rng rng_;
};

}  // namespace kiln::train
