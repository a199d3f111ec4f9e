#pragma once
// One optimizer step for any ParamModel trained by a graph: the gradient
// outputs of each micro-batch are gathered into a flat buffer (summed), then
// averaged, checked for NaN/inf, clipped by global norm and applied by AdamW
// at the scheduled learning rate.
#include <cstdint>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/adamw.h"
#include "engine/train/param_model.h"
#include "engine/train/schedule.h"

namespace kiln::train {

struct OptimizerOptions {
    LrSchedule schedule;
    AdamWOptions adam;
    float grad_clip = 1.0f;  // global norm; 0 = off
};

struct StepResult {
    double loss = 0.0;       // mean over the micro-batches
    double grad_norm = 0.0;  // before clipping
    double lr = 0.0;
};

class Optimizer {
public:
    Optimizer(ParamModel& model, const OptimizerOptions& options, ThreadPool& pool);

    // Adds the gradient nodes (one per model tensor, in order) of a graph that
    // has just run, times `weight`; `first` starts a new step's sum.
    void gather(const Graph& g, const std::vector<NodeId>& grads, bool first, float weight = 1.0f);
    // The gradients gathered so far, flat like the model (GradientSync adds
    // the last micro-batch's and the other ranks' to them).
    std::vector<float>& gathered() noexcept { return grads_; }
    // Finishes the step over `micro_batches` gathered batches whose losses sum
    // to loss_sum. A non-finite loss or gradient norm throws kiln::Error("train")
    // before the parameters change.
    StepResult step(double loss_sum, int64_t micro_batches);

    int64_t steps_done() const noexcept { return step_; }
    const std::vector<float>& gradients() const noexcept { return grads_; }
    AdamW& adam() noexcept { return adam_; }
    const AdamW& adam() const noexcept { return adam_; }
    void set_steps_done(int64_t step) noexcept { step_ = step; }

private:
    ParamModel& model_;
    OptimizerOptions options_;
    ThreadPool& pool_;
    AdamW adam_;
    std::vector<float> grads_;
    int64_t step_ = 0;
};

}  // namespace kiln::train
