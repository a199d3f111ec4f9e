#pragma once
// Training the encoder-decoder on the string-reversal task, and measuring it:
// the teacher-forced loss of the held-out examples, and their exact match
// when the inference engine decodes them (greedy and with beam search) from
// the model file the trainer would write at that moment. Everything a resumed
// run needs is in training_state()/restore().
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/optimizer.h"
#include "engine/train/reverse_task.h"
#include "engine/train/seq2seq_gguf.h"
#include "engine/train/seq2seq_model.h"
#include "engine/train/trainer_core.h"

namespace kiln::train {

struct Seq2SeqTrainOptions {
    Seq2SeqConfig model;
    int64_t batch = 32;
    OptimizerOptions optimizer;
    float dropout = 0.0f;
    uint64_t seed = 1337;
};

struct HeldOutMatch {
    double greedy = 0.0, beam = 0.0;  // fractions of the held-out strings answered exactly
};

class Seq2SeqTrainer {
public:
    Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool);

    // Continues from a checkpoint (its weights, step, moments and generator state).
    void restore(const LoadedSeq2Seq& checkpoint);
    TrainingState training_state() const;

    // One optimizer step on a fresh batch. A non-finite loss or gradient norm
    // throws kiln::Error("train") before the parameters are touched.
    StepResult step();

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
    const ReverseTask& task() const noexcept { return task_; }
    int64_t steps_done() const noexcept { return core_.steps_done(); }

private:
    Seq2SeqTrainOptions options_;
    const ReverseTask& task_;
    ThreadPool& pool_;
    std::unique_ptr<Seq2SeqModel> model_;
    std::unique_ptr<Seq2SeqGraph> train_graph_, eval_graph_;
    std::unique_ptr<Executor> train_exec_, eval_exec_;
    TrainerCore core_;
};

}  // namespace kiln::train
