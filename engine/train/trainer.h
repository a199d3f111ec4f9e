#pragma once
// What kiln-train's loop drives, whatever the model and the task: optimizer
// steps, the task's evaluation, the training state, the model file and the
// checkpoint, and the few lines it says about them. A trainer is made by its
// factory, already resumed when there is a checkpoint (a text trainer's model
// and vocabulary come from it); a new trainer is an implementation of this
// plus one line in kiln-train's factory.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/core/dtype.h"
#include "engine/train/gradient_sync.h"
#include "engine/train/optimizer.h"
#include "engine/train/param_gguf.h"
#include "engine/train/param_model.h"

namespace kiln::train {

// The task's measures after a step; what a task does not measure stays empty.
struct Evaluation {
    std::optional<double> train_loss, val_loss;    // text: sampled windows of each split; reverse: held-out loss (val)
    std::optional<double> greedy_match, beam_match;  // held-out exact match (fractions)
};

class Trainer {
public:
    virtual ~Trainer() = default;

    // One optimizer step. A non-finite loss or gradient norm throws
    // kiln::Error("train") before the parameters are touched.
    virtual StepResult step() = 0;
    virtual Evaluation evaluate() = 0;

    virtual int64_t steps_done() const = 0;
    virtual TrainingState training_state() const = 0;
    virtual const ParamModel& parameters() const = 0;
    // Positions the graph runs per optimizer step (for tokens/s).
    virtual int64_t tokens_per_step() const = 0;

    // The model file kiln runs (matrices in `type`); with a training state, the checkpoint.
    virtual void write(const std::filesystem::path& path, DType type, const TrainingState* training = nullptr) const = 0;

    // Data-parallel: the figures of the gradient sums over the ranks (nullptr alone).
    virtual const GradientSync::Stats* sync_stats() const { return nullptr; }

    // The log has the held-out exact-match columns.
    virtual bool logs_accuracy() const = 0;
    // What trains on what, for the first line ("...: 0.05M parameters" follows).
    virtual std::string description() const = 0;
    // An evaluation after a step of loss `loss`, for its line "step N: ...".
    virtual std::string evaluation_line(const Evaluation& e, double loss) const = 0;
    // The end of the last line, after "wrote MODEL (type); ": the last
    // evaluation, and `tokens` trained in `seconds`.
    virtual std::string outcome(const Evaluation& last, int64_t tokens, double seconds) const = 0;
};

}  // namespace kiln::train
