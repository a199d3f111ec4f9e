#include "engine/train/reverse_trainer.h"

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/train/seq2seq_gguf.h"
#include "engine/train/train_log.h"

namespace kiln::train {

ReverseTrainer::ReverseTrainer(int64_t max_length, int64_t held_out, const Seq2SeqTrainOptions& options,
                               int32_t eval_beams, DType eval_type, ThreadPool& pool)
    : task_(max_length, held_out, options.seed),
      trainer_(std::make_unique<Seq2SeqTrainer>(options, task_, pool)),
      batch_(options.batch),
      eval_beams_(eval_beams),
      eval_type_(eval_type) {}

void ReverseTrainer::restore(const std::filesystem::path& path) {
    const LoadedSeq2Seq checkpoint = read_seq2seq_checkpoint(path);
    if (!checkpoint.training)
        fail("train", "{} is a model, not a training checkpoint (no optimizer state)", path.string());
    if (checkpoint.vocabulary != ReverseTask::vocabulary())
        fail("train", "{} was not trained on the reversal task (another vocabulary)", path.string());
    trainer_->restore(checkpoint);
}

Evaluation ReverseTrainer::evaluate() {
    Evaluation e;
    e.val_loss = trainer_->held_out_loss();
    const HeldOutMatch match = trainer_->held_out_match(eval_beams_, eval_type_);
    e.greedy_match = match.greedy;
    e.beam_match = match.beam;
    return e;
}

void ReverseTrainer::write(const std::filesystem::path& path, DType type, const TrainingState* training) const {
    write_seq2seq_model(path, trainer_->model(), ReverseTask::model_vocabulary(), type, training);
}

std::string ReverseTrainer::description() const {
    const Seq2SeqConfig& c = trainer_->model().config();
    return fmt::format("reverse strings of 1..{} letters ({} held out); encoder-decoder {}+{} layers, {} heads, width {}, {}",
                       task_.sequence_length() - 1, task_.held_out().size(), c.encoder_layers, c.decoder_layers, c.heads,
                       c.width, c.norm_first ? "pre-LN" : "post-LN");
}

std::string ReverseTrainer::evaluation_line(const Evaluation& e, double loss) const {
    return fmt::format("loss {:.4f}, held-out loss {:.4f}, exact match {:.2f}% greedy, {:.2f}% with {} beams", loss,
                       e.val_loss.value_or(NAN), 100.0 * e.greedy_match.value_or(0.0), 100.0 * e.beam_match.value_or(0.0),
                       eval_beams_);
}

std::string ReverseTrainer::outcome(const Evaluation& last, int64_t, double seconds) const {
    return fmt::format("held-out exact match {:.2f}% greedy, {:.2f}% with {} beams, after {}",
                       100.0 * last.greedy_match.value_or(0.0), 100.0 * last.beam_match.value_or(0.0), eval_beams_,
                       format_duration(seconds));
}

}  // namespace kiln::train
