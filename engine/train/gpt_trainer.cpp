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
    adam_ = std::make_unique<AdamW>(model_->data().size(), options_.adam);
    grads_.assign(model_->data().size(), 0.0f);
}

void GptTrainer::restore(const LoadedGpt& checkpoint) {
    if (!checkpoint.training) fail("train", "the checkpoint holds no training state");
    if (checkpoint.data.size() != model_->data().size()) fail("train", "the checkpoint does not match the model");
    model_->data() = checkpoint.data;  // same size: the graph's pointers stay valid
    adam_->m() = checkpoint.training->adam_m;
    adam_->v() = checkpoint.training->adam_v;
    step_ = checkpoint.training->step;
    rng_.set_state(checkpoint.training->rng_state);
}

TrainingState GptTrainer::training_state() const {
    return TrainingState{step_, rng_.state(), adam_->m(), adam_->v()};
}

void GptTrainer::run_micro_batch(int64_t micro, bool first) {
    GptGraph& G = *train_graph_;
    G.set_dropout_seed(options_.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(step_ * options_.accumulation + micro));
    train_exec_->run(pool_);
    // Gradient nodes are graph outputs; gather them into the flat buffer.
    const auto& tensors = model_->tensors();
    pool_.run([&](int ith, int nth) {
        for (size_t i = 0; i < tensors.size(); ++i) {
            const ParamSegment& s = tensors[i].segment;
            const auto [b, e] = split_range(static_cast<int64_t>(s.count), ith, nth);
            const float* src = G.graph.node(G.grads[i]).row(0);
            float* dst = grads_.data() + s.offset;
            if (first) std::memcpy(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
            else for (int64_t j = b; j < e; ++j) dst[j] += src[j];
        }
    });
}

StepResult GptTrainer::step(const std::vector<int32_t>& train) {
    double loss_sum = 0.0;
    GptGraph& G = *train_graph_;
    for (int64_t micro = 0; micro < options_.accumulation; ++micro) {
        sample_windows(train, G.batch, G.context, rng_, G.token_data(), G.target_data());
        run_micro_batch(micro, micro == 0);
        loss_sum += G.loss_value();
    }
    return finish_step(loss_sum);
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
    return finish_step(G.loss_value());
}

StepResult GptTrainer::finish_step(double loss_sum) {
    StepResult r;
    r.loss = loss_sum / static_cast<double>(options_.accumulation);
    if (options_.accumulation > 1) scale_in_place(pool_, grads_, 1.0f / static_cast<float>(options_.accumulation));
    r.grad_norm = global_norm(pool_, grads_);
    const auto show = [](double x) { return std::isnan(x) ? std::string("nan") : fmt::format("{}", x); };
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))
        fail("train", "step {}: the loss is {} (gradient norm {}); stopping before the parameters change", step_ + 1,
             show(r.loss), show(r.grad_norm));
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when
    // that is below 1 (applied inside the update; grads_ keep the raw values).
    float clip = 1.0f;
    if (const double coef = options_.grad_clip / (r.grad_norm + 1e-6); options_.grad_clip > 0.0f && coef < 1.0)
        clip = static_cast<float>(coef);
    r.lr = options_.schedule.at(step_);
    const std::vector<ParamSegment> segments = model_->segments();
    adam_->update(pool_, model_->data(), grads_, segments, r.lr, step_ + 1, clip);
    ++step_;
    return r;
}

double GptTrainer::evaluate(const std::vector<int32_t>& data, int64_t batches) {
    Rng rng(options_.seed ^ (0xe7a1ULL << 32) ^ static_cast<uint64_t>(step_));
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
