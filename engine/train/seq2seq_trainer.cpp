#include "engine/train/seq2seq_trainer.h"

#include <algorithm>

namespace kiln::train {

Seq2SeqTrainer::Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool)
    : options_(options), task_(task), pool_(pool), rng_(options.seed) {
    options_.model.vocab = static_cast<int64_t>(ReverseTask::vocabulary().size());
    options_.model.context = std::max(options_.model.context, task.sequence_length());
    model_ = std::make_unique<Seq2SeqModel>(options_.model);
    Rng init(options_.seed ^ 0x5eed0f1e1d5ULL);
    model_->initialize(init);
    const int64_t len = task.sequence_length();
    train_graph_ = build_seq2seq_graph(*model_, options_.batch, len, len, true);
    eval_graph_ = build_seq2seq_graph(*model_, options_.batch, len, len, false);
    train_exec_ = std::make_unique<Executor>(train_graph_->graph);
    eval_exec_ = std::make_unique<Executor>(eval_graph_->graph);
    optimizer_ = std::make_unique<Optimizer>(*model_, options_.optimizer, pool_);
}

StepResult Seq2SeqTrainer::step() {
    Seq2SeqGraph& G = *train_graph_;
    for (int64_t b = 0; b < G.batch; ++b)
        task_.fill(task_.sample(rng_), b, G.source_data(), G.mask_data(), G.decoder_input_data(), G.label_data());
    train_exec_->run(pool_);
    optimizer_->gather(G.graph, G.grads, true);
    return optimizer_->step(G.loss_value(), 1);
}

// The whole decoder reruns for each new token (the causal mask makes the
// earlier positions' outputs independent of the later, still padded ones).
std::vector<std::string> Seq2SeqTrainer::greedy(const std::vector<std::string>& texts) {
    Seq2SeqGraph& G = *eval_graph_;
    const int64_t len = G.tgt_len, vocab = options_.model.vocab;
    std::vector<std::string> answers;
    for (size_t first = 0; first < texts.size(); first += static_cast<size_t>(G.batch)) {
        const auto count = static_cast<int64_t>(std::min(texts.size() - first, static_cast<size_t>(G.batch)));
        for (int64_t b = 0; b < G.batch; ++b) {
            const std::string& text = texts[first + static_cast<size_t>(std::min(b, count - 1))];
            task_.fill(text, b, G.source_data(), G.mask_data(), G.decoder_input_data(), G.label_data());
            for (int64_t t = 1; t < len; ++t) G.decoder_input_data()[b * len + t] = ReverseTask::kPad;
        }
        std::vector<std::vector<int32_t>> out(static_cast<size_t>(G.batch));
        std::vector<bool> done(static_cast<size_t>(G.batch), false);
        for (int64_t t = 0; t < len; ++t) {
            eval_exec_->run(pool_);
            for (int64_t b = 0; b < G.batch; ++b) {
                if (done[static_cast<size_t>(b)]) continue;
                const float* row = G.graph.node(G.logits).row(b * len + t);
                const auto best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
                out[static_cast<size_t>(b)].push_back(best);
                if (best == ReverseTask::kEos) done[static_cast<size_t>(b)] = true;
                else if (t + 1 < len) G.decoder_input_data()[b * len + t + 1] = best;
            }
        }
        for (int64_t b = 0; b < count; ++b) answers.push_back(ReverseTask::decode(out[static_cast<size_t>(b)]));
    }
    return answers;
}

double Seq2SeqTrainer::held_out_accuracy() {
    const std::vector<std::string> answers = greedy(task_.held_out());
    int64_t right = 0;
    for (size_t i = 0; i < answers.size(); ++i) right += answers[i] == ReverseTask::answer(task_.held_out()[i]) ? 1 : 0;
    return static_cast<double>(right) / static_cast<double>(answers.size());
}

}  // namespace kiln::train
