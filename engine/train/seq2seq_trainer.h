#pragma once
// Training the encoder-decoder on the string-reversal task, and measuring it:
// greedy decoding of the held-out examples (exact match).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/optimizer.h"
#include "engine/train/reverse_task.h"
#include "engine/train/seq2seq_model.h"

namespace kiln::train {

struct Seq2SeqTrainOptions {
    Seq2SeqConfig model;
    int64_t batch = 32;
    OptimizerOptions optimizer;
    uint64_t seed = 1337;
};

class Seq2SeqTrainer {
public:
    Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool);

    StepResult step();
    // The model's greedy answers for these strings.
    std::vector<std::string> greedy(const std::vector<std::string>& texts);
    // Fraction of held-out examples answered exactly.
    double held_out_accuracy();

    Seq2SeqModel& model() noexcept { return *model_; }
    int64_t steps_done() const noexcept { return optimizer_->steps_done(); }

private:
    Seq2SeqTrainOptions options_;
    const ReverseTask& task_;
    ThreadPool& pool_;
    std::unique_ptr<Seq2SeqModel> model_;
    std::unique_ptr<Seq2SeqGraph> train_graph_, eval_graph_;
    std::unique_ptr<Executor> train_exec_, eval_exec_;
    std::unique_ptr<Optimizer> optimizer_;
    Rng rng_;
};

}  // namespace kiln::train
