#include "engine/train/causal_lm_trainer.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/train/char_corpus.h"

namespace kiln::train {

void CausalTrainOptions::validate() const {
    if (batch < 1 || accumulation < 1)
        fail("train", "batch {} and accumulation {} must be positive", batch, accumulation);
    if (!(dropout >= 0.0f && dropout < 1.0f)) fail("train", "dropout {} is outside [0, 1)", dropout);
}

CausalLmTrainer::CausalLmTrainer(std::unique_ptr<ParamModel> model, int64_t context, const CausalTrainOptions& options,
                                 const CausalGraphBuilder& build, ThreadPool& pool)
    : batch_(options.batch),
      rows_(batch_rows(options.batch, options.collective)),
      model_(std::move(model)),
      train_graph_(build(*model_, rows_.size(), context, true, options.dropout)),
      eval_graph_(build(*model_, rows_.size(), context, false, 0.0f)),
      train_exec_(std::make_unique<Executor>(train_graph_->graph)),
      eval_exec_(std::make_unique<Executor>(eval_graph_->graph)),
      core_(*model_, options.optimizer(), options.seed, options.accumulation, pool, options.collective) {
    train_graph_->first_sequence = rows_.begin;
    train_graph_->sequences = rows_.size();
}

StepResult CausalLmTrainer::step(const std::vector<int32_t>& train) {
    CausalTrainGraph& G = *train_graph_;
    return core_.step(G, *train_exec_, [&](Rng& rng) {
        sample_windows(train, batch_, G.context, rng, G.token_data(), G.target_data(), rows_);
        return static_cast<double>(G.batch * G.context);
    });
}

StepResult CausalLmTrainer::step_on(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets) {
    CausalTrainGraph& G = *train_graph_;
    const auto n = static_cast<size_t>(G.batch * G.context);
    if (core_.accumulation() != 1) fail("train", "a given batch is one micro-batch: accumulation must be 1");
    if (core_.collective().size() > 1) fail("train", "a given batch is for one process, not {} ranks", core_.collective().size());
    if (tokens.size() != n || targets.size() != n)
        fail("train", "{} tokens and {} targets for a batch of {}", tokens.size(), targets.size(), n);
    return core_.step(G, *train_exec_, [&](Rng&) {
        std::copy(tokens.begin(), tokens.end(), G.token_data());
        std::copy(targets.begin(), targets.end(), G.target_data());
        return static_cast<double>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
    });
}

double CausalLmTrainer::evaluate(const std::vector<int32_t>& data, int64_t batches) {
    Rng rng(core_.seed() ^ (0xe7a1ULL << 32) ^ static_cast<uint64_t>(steps_done()));
    CausalTrainGraph& G = *eval_graph_;
    return core_.mean_loss(G, *eval_exec_, batches, [&](int64_t) {
        sample_windows(data, batch_, G.context, rng, G.token_data(), G.target_data(), rows_);
        return static_cast<double>(G.batch * G.context);
    });
}

}  // namespace kiln::train
