#pragma once
// Training the encoder-decoder on the string-reversal task, and measuring it:
// the teacher-forced loss of the held-out examples, and their exact match
// when the inference engine decodes them (greedy and with beam search) from
// the model file the trainer would write at that moment. Everything a resumed
// run needs is in training_state()/restore(). kiln-train drives it as a Trainer.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/optimizer.h"
#include "engine/train/reverse_task.h"
#include "engine/train/seq2seq_gguf.h"
#include "engine/train/seq2seq_model.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_core.h"

namespace kiln::train {

struct Seq2SeqTrainOptions {
    Seq2SeqConfig model;
    int64_t batch = 32;
    OptimizerOptions optimizer;
    float dropout = 0.0f;
    uint64_t seed = 1337;
    // evaluate(): beams of the held-out beam search, and the type of the matrices decoded.
    int32_t eval_beams = 4;
    DType eval_type = DType::F32;
    // Data-parallel: the ranks that share each batch and the held-out
    // evaluation (nullptr: this process alone).
    Collective* collective = nullptr;
};

struct HeldOutMatch {
    double greedy = 0.0, beam = 0.0;  // fractions of the held-out strings answered exactly
};

class Seq2SeqTrainer : public Trainer {
public:
    // The task is copied: the trainer samples from it and holds its held-out strings.
    Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool);

    // Continues from a checkpoint (its weights, step, moments and generator state).
    void restore(const LoadedSeq2Seq& checkpoint);
    // The same from a file, which must be a checkpoint of the reversal task.
    void restore(const std::filesystem::path& checkpoint);
    TrainingState training_state() const override;

    // One optimizer step on a fresh batch. A non-finite loss or gradient norm
    // throws kiln::Error("train") before the parameters are touched.
    StepResult step() override;
    // The held-out loss and exact match (options.eval_beams, options.eval_type).
    Evaluation evaluate() override;

    // The model's answers for these strings, decoded by the inference engine
    // with `beams` beams (1: greedy), from the model file written with
    // matrices of `type` (what kiln would answer with that file).
    std::vector<std::string> answers(const std::vector<std::string>& texts, int32_t beams, DType type = DType::F32);
    // Exact match on the held-out strings, greedy and with `beams` beams.
    HeldOutMatch held_out_match(int32_t beams, DType type = DType::F32);
    // The mean teacher-forced loss per target token of the held-out examples.
    double held_out_loss();

    Seq2SeqModel& model() noexcept { return *model_; }
    const Seq2SeqModel& model() const noexcept { return *model_; }
    int64_t steps_done() const noexcept override { return core_.steps_done(); }

    const ParamModel& parameters() const override { return *model_; }
    // Positions the graph runs per step: every source and target row of the batch.
    int64_t tokens_per_step() const override { return 2 * options_.batch * task_.sequence_length(); }
    void write(const std::filesystem::path& path, DType type, const TrainingState* training) const override;
    const GradientSync::Stats* sync_stats() const override { return core_.sync_stats(); }
    bool logs_accuracy() const override { return true; }
    std::string description() const override;
    std::string evaluation_line(const Evaluation& e, double loss) const override;
    std::string outcome(const Evaluation& last, int64_t tokens, double seconds) const override;

private:
    Seq2SeqTrainOptions options_;
    Share rows_;  // this rank's rows of each batch
    ReverseTask task_;
    ThreadPool& pool_;
    std::unique_ptr<Seq2SeqModel> model_;
    std::unique_ptr<Seq2SeqGraph> train_graph_, eval_graph_;
    std::unique_ptr<Executor> train_exec_, eval_exec_;
    TrainerCore core_;
};

}  // namespace kiln::train
