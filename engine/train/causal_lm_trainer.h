#pragma once
// Training any decoder-only model on token windows: sample windows, run the
// architecture's forward + backward graph (accumulating gradients over
// micro-batches), clip by global norm, AdamW. Evaluation runs a forward-only
// graph on the same parameters. What differs between architectures is the
// model and how its graph is built; GptTrainer (and the Llama's) supply those.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/adamw.h"
#include "engine/train/causal_train_graph.h"
#include "engine/train/optimizer.h"
#include "engine/train/param_model.h"
#include "engine/train/schedule.h"
#include "engine/train/trainer_core.h"

namespace kiln::train {

// Everything of a decoder-only training run but the model's own shape.
struct CausalTrainOptions {
    int64_t batch = 12;
    int64_t accumulation = 1;   // micro-batches per optimizer step
    LrSchedule schedule;
    AdamWOptions adam;
    float grad_clip = 1.0f;     // global norm; 0 = off
    float dropout = 0.0f;
    bool decay_embeddings = false;
    uint64_t seed = 1337;
    // Data-parallel: the ranks that share each batch (nullptr: this process
    // alone). Each builds its graphs for its share of the batch's windows.
    Collective* collective = nullptr;

    OptimizerOptions optimizer() const { return {schedule, adam, grad_clip}; }
    // kiln::Error("train") for a batch, accumulation or dropout out of range.
    void validate() const;
};

// A fresh model for a run: options checked, then Model(args...) initialized
// from the run's seed (initialization_rng).
template <typename Model, typename... Args>
std::unique_ptr<Model> fresh_model(const CausalTrainOptions& options, Args&&... args) {
    options.validate();
    auto model = std::make_unique<Model>(std::forward<Args>(args)...);
    Rng init = initialization_rng(options.seed);
    model->initialize(init);
    return model;
}

// Builds (and plans) the model's graph of `batch` windows of `context` tokens.
// training: with dropout (p > 0) and the backward pass.
using CausalGraphBuilder = std::function<std::unique_ptr<CausalTrainGraph>(ParamModel& model, int64_t batch,
                                                                          int64_t context, bool training, float dropout)>;

class CausalLmTrainer {
public:
    // model: initialized (a fresh one) or to be restored; context: tokens per window.
    CausalLmTrainer(std::unique_ptr<ParamModel> model, int64_t context, const CausalTrainOptions& options,
                    const CausalGraphBuilder& build, ThreadPool& pool);
    virtual ~CausalLmTrainer() = default;

    // Continues from a checkpoint (its weights, step, moments and generator state).
    void restore(const std::vector<float>& data, const std::optional<TrainingState>& training) {
        core_.restore(data, training);
    }

    // One optimizer step over `train` data. A non-finite loss or gradient norm
    // throws kiln::Error("train") before the parameters are touched.
    StepResult step(const std::vector<int32_t>& train);
    // One optimizer step on a given batch (batch × context tokens and targets;
    // targets of -1 are ignored). Only without accumulation.
    StepResult step_on(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets);

    // Mean loss over `batches` windows of `data`, drawn from a generator seeded
    // by (seed, step), so evaluation never disturbs the training batches.
    double evaluate(const std::vector<int32_t>& data, int64_t batches);

    int64_t steps_done() const noexcept { return core_.steps_done(); }
    TrainingState training_state() const { return core_.training_state(); }
    ParamModel& parameters() noexcept { return *model_; }
    const ParamModel& parameters() const noexcept { return *model_; }
    // Tokens per window and the windows of one optimizer step.
    int64_t context() const noexcept { return train_graph_->context; }
    int64_t windows_per_step() const noexcept { return batch_ * core_.accumulation(); }
    // The last step's gradients, flat like the model: averaged over the
    // micro-batches, before clipping.
    const std::vector<float>& gradients() const noexcept { return core_.gradients(); }
    const GradientSync::Stats* sync_stats() const noexcept { return core_.sync_stats(); }

private:
    int64_t batch_;  // windows per micro-batch, all ranks together
    Share rows_;     // this rank's windows of each batch
    std::unique_ptr<ParamModel> model_;
    std::unique_ptr<CausalTrainGraph> train_graph_, eval_graph_;
    std::unique_ptr<Executor> train_exec_, eval_exec_;
    TrainerCore core_;
};

}  // namespace kiln::train
