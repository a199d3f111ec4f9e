#pragma once
// What every trainer has that is neither its model nor its data: the
// optimizer over the model's parameters, the batch sampler's generator, the
// seeds of the dropout masks, one optimizer step over micro-batches of a
// training graph, the mean loss over batches of an evaluation graph, and the
// training state that a checkpoint keeps and a resumed run restores.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/distributed/collective.h"
#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/optimizer.h"
#include "engine/train/param_gguf.h"
#include "engine/train/param_model.h"
#include "engine/train/gradient_sync.h"
#include "engine/train/rng.h"
#include "engine/train/train_graph.h"

namespace kiln::train {

// The generator a fresh model's weights are drawn from: apart from the batch
// sampler's, which starts from the seed itself.
inline Rng initialization_rng(uint64_t seed) { return Rng(seed ^ 0x5eed0f1e1d5ULL); }

// This rank's rows of every batch of `batch` rows (all of them alone, when
// ranks is nullptr). A CollectiveError when there are fewer rows than ranks:
// each rank needs one at least.
Share batch_rows(int64_t batch, const Collective* ranks);

class TrainerCore {
public:
    // accumulation: micro-batches per optimizer step. collective: the ranks
    // of a data-parallel run (nullptr: this process alone), each of which
    // computes its share of every batch (see step()).
    TrainerCore(ParamModel& model, const OptimizerOptions& options, uint64_t seed, int64_t accumulation, ThreadPool& pool,
                Collective* collective = nullptr);

    // Continues from a checkpoint: its weights (the model's flat buffer), step,
    // AdamW moments and generator state. kiln::Error("train") when it has no
    // training state or does not match the model.
    void restore(const std::vector<float>& data, const std::optional<TrainingState>& training);
    TrainingState training_state() const;

    // One optimizer step: for each micro-batch, fill(rng) writes the batch
    // into g's inputs (drawing from the sampler's generator) and returns the
    // number of targets it counts; g runs with the dropout masks of (seed,
    // step, micro-batch), so a resumed run draws the same ones, and its
    // gradients add up. A non-finite loss or gradient norm throws
    // kiln::Error("train") before the parameters are touched.
    //
    // Data-parallel: every rank draws the whole batch (so the generator stays
    // the one a single process has) and fill writes only this rank's rows;
    // g's mean loss over them, weighted by their share of the batch's counted
    // targets, sums over the ranks to the mean over the whole batch, and so
    // do the gradients (summed across ranks once the micro-batches are done).
    // Every rank then takes the same AdamW step.
    StepResult step(TrainGraph& g, Executor& exec, const std::function<double(Rng&)>& fill);

    // The weighted mean of the losses of `batches` runs of an evaluation
    // graph; fill(b) writes batch b into its inputs and returns its weight
    // (the targets it counts). Data-parallel: this rank's rows of each batch;
    // the sums of all ranks give the mean.
    double mean_loss(TrainGraph& g, Executor& exec, int64_t batches, const std::function<double(int64_t)>& fill);

    int64_t steps_done() const noexcept { return optimizer_.steps_done(); }
    int64_t accumulation() const noexcept { return accumulation_; }
    uint64_t seed() const noexcept { return seed_; }
    ThreadPool& pool() noexcept { return pool_; }
    // The ranks this trainer shares its batches with (a SingleProcess when alone).
    Collective& collective() noexcept { return *collective_; }
    // Data-parallel: the gradient sums' figures so far (nullptr alone).
    const GradientSync::Stats* sync_stats() const noexcept { return sync_ ? &sync_->stats() : nullptr; }
    // The last step's gradients, flat like the model: averaged over the
    // micro-batches, before clipping.
    const std::vector<float>& gradients() const noexcept { return optimizer_.gradients(); }

private:
    ParamModel& model_;
    ThreadPool& pool_;
    uint64_t seed_;
    int64_t accumulation_;
    Optimizer optimizer_;
    Rng rng_;
    SingleProcess alone_;
    Collective* collective_;
    std::unique_ptr<GradientSync> sync_;  // data-parallel: for the training graph
};

}  // namespace kiln::train
