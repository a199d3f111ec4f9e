#include "engine/train/text_trainer.h"

#include <fmt/format.h>

#include <cmath>

#include "engine/train/train_log.h"

namespace kiln::train {

TextTrainer::TextTrainer(std::unique_ptr<CausalLmTrainer> lm, TokenizedText text, int64_t eval_batches, std::string model,
                         ModelWriter writer)
    : lm_(std::move(lm)), text_(std::move(text)), eval_batches_(eval_batches), model_(std::move(model)),
      writer_(std::move(writer)) {}

Evaluation TextTrainer::evaluate() {
    Evaluation e;
    e.train_loss = lm_->evaluate(text_.train, eval_batches_);
    e.val_loss = lm_->evaluate(text_.validation, eval_batches_);
    return e;
}

std::string TextTrainer::evaluation_line(const Evaluation& e, double) const {
    return fmt::format("train loss {:.4f}, val loss {:.4f}", e.train_loss.value_or(NAN), e.val_loss.value_or(NAN));
}

std::string TextTrainer::outcome(const Evaluation& last, int64_t tokens, double seconds) const {
    return fmt::format("validation loss {:.4f}; {:.0f} tokens/s over {}", last.val_loss.value_or(NAN),
                       static_cast<double>(tokens) / seconds, format_duration(seconds));
}

}  // namespace kiln::train
