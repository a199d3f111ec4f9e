#include "engine/train/trainer_core.h"

#include "engine/core/error.h"

namespace kiln::train {

TrainerCore::TrainerCore(ParamModel& model, const OptimizerOptions& options, uint64_t seed, int64_t accumulation,
                         ThreadPool& pool)
    : model_(model), pool_(pool), seed_(seed), accumulation_(accumulation), optimizer_(model, options, pool), rng_(seed) {}

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

StepResult TrainerCore::step(TrainGraph& g, Executor& exec, const std::function<void(Rng&)>& fill) {
    double loss_sum = 0.0;
    for (int64_t micro = 0; micro < accumulation_; ++micro) {
        fill(rng_);
        g.set_dropout_seed(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(steps_done() * accumulation_ + micro));
        exec.run(pool_);
        optimizer_.gather(g.graph, g.grads, micro == 0);
        loss_sum += g.loss_value();
    }
    return optimizer_.step(loss_sum, accumulation_);
}

double TrainerCore::mean_loss(TrainGraph& g, Executor& exec, int64_t batches, const std::function<double(int64_t)>& fill) {
    double sum = 0.0, weights = 0.0;
    for (int64_t b = 0; b < batches; ++b) {
        const double weight = fill(b);
        exec.run(pool_);
        sum += static_cast<double>(g.loss_value()) * weight;
        weights += weight;
    }
    return sum / weights;
}

}  // namespace kiln::train
