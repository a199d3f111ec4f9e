#include "engine/train/trainer_core.h"

#include "engine/core/error.h"

namespace kiln::train {

Share batch_rows(int64_t batch, const Collective* ranks) {
    if (ranks == nullptr) return {0, batch};
    if (batch < ranks->size())
        throw CollectiveError("train", fmt::format("--batch {} is smaller than the {} ranks: each needs a row at least",
                                                   batch, ranks->size()));
    return share_of(batch, ranks->rank(), ranks->size());
}

TrainerCore::TrainerCore(ParamModel& model, const OptimizerOptions& options, uint64_t seed, int64_t accumulation,
                         ThreadPool& pool, Collective* collective)
    : model_(model),
      pool_(pool),
      seed_(seed),
      accumulation_(accumulation),
      optimizer_(model, options, pool),
      rng_(seed),
      collective_(collective != nullptr ? collective : &alone_) {}

void TrainerCore::restore(const std::vector<float>& data, const std::optional<TrainingState>& training) {
    if (!training) fail("train", "the checkpoint holds no training state");
    if (data.size() != model_.data().size()) fail("train", "the checkpoint does not match the model");
    model_.data() = data;  // same size: the graphs' pointers stay valid
    optimizer_.adam().m() = training->adam_m;
    optimizer_.adam().v() = training->adam_v;
    optimizer_.set_steps_done(training->step);
    rng_.set_state(training->rng_state);
}

TrainingState TrainerCore::training_state() const {
    return TrainingState{steps_done(), rng_.state(), optimizer_.adam().m(), optimizer_.adam().v()};
}

StepResult TrainerCore::step(TrainGraph& g, Executor& exec, const std::function<double(Rng&)>& fill) {
    Collective& ranks = *collective_;
    double loss_sum = 0.0;
    for (int64_t micro = 0; micro < accumulation_; ++micro) {
        // This rank's share of the micro-batch's counted targets: 1 alone.
        double counted[2] = {fill(rng_), 0.0};
        counted[1] = counted[0];
        ranks.sum(std::span(counted + 1, 1));
        // (No counted target at all: the loss is 0/0, and step() says so.)
        const double share = counted[1] > 0.0 ? counted[0] / counted[1] : 1.0;
        g.set_dropout_seed(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(steps_done() * accumulation_ + micro));
        if (ranks.size() > 1 && micro + 1 == accumulation_) {
            // The last micro-batch: its gradients join the sum over the
            // ranks bucket by bucket while its backward still runs.
            if (!sync_ || sync_->graph() != &g) sync_ = std::make_unique<GradientSync>(model_, g, exec, ranks);
            sync_->run(g, exec, pool_, optimizer_.gathered(), micro == 0, static_cast<float>(share));
        } else {
            exec.run(pool_);
            // Rows with no counted target have a mean loss of 0/0: they add nothing.
            optimizer_.gather(g.graph, g.grads, micro == 0, static_cast<float>(share));
        }
        if (share > 0.0) loss_sum += share * g.loss_value();
    }
    if (ranks.size() > 1) ranks.sum(std::span(&loss_sum, 1));
    return optimizer_.step(loss_sum, accumulation_);
}

double TrainerCore::mean_loss(TrainGraph& g, Executor& exec, int64_t batches, const std::function<double(int64_t)>& fill) {
    double sums[2] = {0.0, 0.0};  // weighted losses, weights
    for (int64_t b = 0; b < batches; ++b) {
        const double weight = fill(b);
        exec.run(pool_);
        if (weight > 0.0) {
            sums[0] += static_cast<double>(g.loss_value()) * weight;
            sums[1] += weight;
        }
    }
    collective_->sum(std::span(sums));
    return sums[0] / sums[1];
}

}  // namespace kiln::train
