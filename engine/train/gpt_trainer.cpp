#include "engine/train/gpt_trainer.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "engine/core/error.h"

namespace kiln::train {

GptTrainer::GptTrainer(const TrainOptions& options, ThreadPool& pool)
    : options_(options), pool_(pool), rng_(options.seed) {
    if (options_.batch < 1 || options_.accumulation < 1)
        fail("train", "batch {} and accumulation {} must be positive", options_.batch, options_.accumulation);
    if (!(options_.dropout >= 0.0f && options_.dropout < 1.0f)) fail("train", "dropout {} is outside [0, 1)", options_.dropout);
    model_ = std::make_unique<GptModel>(options_.model, options_.decay_embeddings);
    Rng init(options_.seed ^ 0x5eed0f1e1d5ULL);
    model_->initialize(init);
    const int64_t context = options_.model.context;
    train_graph_ = build_gpt_graph(*model_, options_.batch, context, true, options_.dropout);
    eval_graph_ = build_gpt_graph(*model_, options_.batch, context, false, 0.0f);
    train_exec_ = std::make_unique<Executor>(train_graph_->graph);
    eval_exec_ = std::make_unique<Executor>(eval_graph_->graph);
    optimizer_ = std::make_unique<Optimizer>(*model_, options_.optimizer(), pool_);
}

void GptTrainer::restore(const LoadedGpt& checkpoint) {
    if (!checkpoint.training) fail("train", "the checkpoint holds no training state");
    if (checkpoint.data.size() != model_->data().size()) fail("train", "the checkpoint does not match the model");
    model_->data() = checkpoint.data;  // same size: the graph's pointers stay valid
    optimizer_->adam().m() = checkpoint.training->adam_m;
    optimizer_->adam().v() = checkpoint.training->adam_v;
    optimizer_->set_steps_done(checkpoint.training->step);
    rng_.set_state(checkpoint.training->rng_state);
}

TrainingState GptTrainer::training_state() const {
    return TrainingState{steps_done(), rng_.state(), optimizer_->adam().m(), optimizer_->adam().v()};
}

void GptTrainer::run_micro_batch(int64_t micro, bool first) {
    GptGraph& G = *train_graph_;
    G.set_dropout_seed(options_.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(steps_done() * options_.accumulation + micro));
    train_exec_->run(pool_);
    optimizer_->gather(G.graph, G.grads, first);
}

StepResult GptTrainer::step(const std::vector<int32_t>& train) {
    double loss_sum = 0.0;
    GptGraph& G = *train_graph_;
    for (int64_t micro = 0; micro < options_.accumulation; ++micro) {
        sample_windows(train, G.batch, G.context, rng_, G.token_data(), G.target_data());
        run_micro_batch(micro, micro == 0);
        loss_sum += G.loss_value();
    }
    return optimizer_->step(loss_sum, options_.accumulation);
}

StepResult GptTrainer::step_on(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets) {
    GptGraph& G = *train_graph_;
    const auto n = static_cast<size_t>(G.batch * G.context);
    if (options_.accumulation != 1) fail("train", "a given batch is one micro-batch: accumulation must be 1");
    if (tokens.size() != n || targets.size() != n)
        fail("train", "{} tokens and {} targets for a batch of {}", tokens.size(), targets.size(), n);
    std::copy(tokens.begin(), tokens.end(), G.token_data());
    std::copy(targets.begin(), targets.end(), G.target_data());
    run_micro_batch(0, true);
    return optimizer_->step(G.loss_value(), 1);
}

double GptTrainer::evaluate(const std::vector<int32_t>& data, int64_t batches) {
    Rng rng(options_.seed ^ (0xe7a1ULL << 32) ^ static_cast<uint64_t>(steps_done()));
    GptGraph& G = *eval_graph_;
    double total = 0.0;
    for (int64_t b = 0; b < batches; ++b) {
        sample_windows(data, G.batch, G.context, rng, G.token_data(), G.target_data());
        eval_exec_->run(pool_);
        total += G.loss_value();
    }
    return total / static_cast<double>(batches);
}

}  // namespace kiln::train
