#pragma once
// A decoder-only model trained on a text (the character GPT; any
// CausalLmTrainer): steps on windows of the training split, evaluated by the
// mean loss of sampled windows of the training and the validation split.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/causal_lm_trainer.h"
#include "engine/train/trainer.h"

namespace kiln::train {

// Writes the trained model (with its vocabulary) as `path`; with a training state, the checkpoint.
using ModelWriter = std::function<void(const std::filesystem::path& path, DType type, const TrainingState* training)>;

struct TokenizedText {
    std::vector<int32_t> train, validation;
    std::string description;  // e.g. "1000 characters (900 train, 100 validation), vocabulary 30"
};

class TextTrainer : public Trainer {
public:
    // model: e.g. "4 layers, 4 heads, width 128, context 64"; eval_batches: batches per split and evaluation.
    TextTrainer(std::unique_ptr<CausalLmTrainer> lm, TokenizedText text, int64_t eval_batches, std::string model,
                ModelWriter writer);

    StepResult step() override { return lm_->step(text_.train); }
    Evaluation evaluate() override;
    int64_t steps_done() const override { return lm_->steps_done(); }
    TrainingState training_state() const override { return lm_->training_state(); }
    const ParamModel& parameters() const override { return lm_->parameters(); }
    int64_t tokens_per_step() const override { return lm_->windows_per_step() * lm_->context(); }
    void write(const std::filesystem::path& path, DType type, const TrainingState* training) const override {
        writer_(path, type, training);
    }
    const GradientSync::Stats* sync_stats() const override { return lm_->sync_stats(); }
    bool logs_accuracy() const override { return false; }
    std::string description() const override { return text_.description + "; " + model_; }
    std::string evaluation_line(const Evaluation& e, double loss) const override;
    std::string outcome(const Evaluation& last, int64_t tokens, double seconds) const override;

private:
    std::unique_ptr<CausalLmTrainer> lm_;
    TokenizedText text_;
    int64_t eval_batches_;
    std::string model_;
    ModelWriter writer_;
};

}  // namespace kiln::train
