#pragma once
// The encoder-decoder on the generated string-reversal task, as kiln-train
// drives it: steps on fresh pairs, evaluated by the held-out loss and the
// held-out exact match of greedy and beam decoding (of the model file that
// would be written with `type` at that step).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/train/reverse_task.h"
#include "engine/train/seq2seq_trainer.h"
#include "engine/train/trainer.h"

namespace kiln::train {

class ReverseTrainer : public Trainer {
public:
    // A fresh model on a new task (of options.seed).
    ReverseTrainer(int64_t max_length, int64_t held_out, const Seq2SeqTrainOptions& options, int32_t eval_beams,
                   DType eval_type, ThreadPool& pool);

    // Continues from a checkpoint of the same task and model flags; kiln::Error otherwise.
    void restore(const std::filesystem::path& checkpoint);

    StepResult step() override { return trainer_->step(); }
    Evaluation evaluate() override;
    int64_t steps_done() const override { return trainer_->steps_done(); }
    TrainingState training_state() const override { return trainer_->training_state(); }
    const ParamModel& parameters() const override { return trainer_->model(); }
    // Positions the graph runs per step: every source and target row of the batch.
    int64_t tokens_per_step() const override { return 2 * batch_ * task_.sequence_length(); }
    void write(const std::filesystem::path& path, DType type, const TrainingState* training) const override;
    bool logs_accuracy() const override { return true; }
    std::string description() const override;
    std::string evaluation_line(const Evaluation& e, double loss) const override;
    std::string outcome(const Evaluation& last, int64_t tokens, double seconds) const override;

private:
    ReverseTask task_;
    std::unique_ptr<Seq2SeqTrainer> trainer_;  // refers to task_
    int64_t batch_;
    int32_t eval_beams_;
    DType eval_type_;
};

}  // namespace kiln::train
