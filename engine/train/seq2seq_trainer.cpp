#include "engine/train/seq2seq_trainer.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/train/seq2seq_inference.h"

namespace kiln::train {

Seq2SeqTrainer::Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool)
    : options_(options), task_(task), pool_(pool), rng_(options.seed) {
    options_.model.vocab = static_cast<int64_t>(ReverseTask::vocabulary().size());
    options_.model.context = std::max(options_.model.context, task.sequence_length());
    model_ = std::make_unique<Seq2SeqModel>(options_.model);
    Rng init(options_.seed ^ 0x5eed0f1e1d5ULL);
    model_->initialize(init);
    const int64_t len = task.sequence_length();
    train_graph_ = build_seq2seq_graph(*model_, options_.batch, len, len, true, options_.dropout);
    eval_graph_ = build_seq2seq_graph(*model_, options_.batch, len, len, false);
    train_exec_ = std::make_unique<Executor>(train_graph_->graph);
    eval_exec_ = std::make_unique<Executor>(eval_graph_->graph);
    optimizer_ = std::make_unique<Optimizer>(*model_, options_.optimizer, pool_);
}

void Seq2SeqTrainer::restore(const LoadedSeq2Seq& checkpoint) {
    if (!checkpoint.training) fail("train", "the checkpoint holds no training state");
    const Seq2SeqConfig &a = checkpoint.config, &b = model_->config();
    if (a.vocab != b.vocab || a.context != b.context || a.width != b.width || a.ffn != b.ffn ||
        a.encoder_layers != b.encoder_layers || a.decoder_layers != b.decoder_layers || a.heads != b.heads ||
        a.norm_first != b.norm_first || a.gelu != b.gelu || checkpoint.data.size() != model_->data().size())
        fail("train", "the checkpoint's model (width {}, {}+{} layers, {} heads, context {}) is not this one (width {}, "
             "{}+{} layers, {} heads, context {})", a.width, a.encoder_layers, a.decoder_layers, a.heads, a.context,
             b.width, b.encoder_layers, b.decoder_layers, b.heads, b.context);
    model_->data() = checkpoint.data;  // same size: the graphs' pointers stay valid
    optimizer_->adam().m() = checkpoint.training->adam_m;
    optimizer_->adam().v() = checkpoint.training->adam_v;
    optimizer_->set_steps_done(checkpoint.training->step);
    rng_.set_state(checkpoint.training->rng_state);
}

TrainingState Seq2SeqTrainer::training_state() const {
    return TrainingState{steps_done(), rng_.state(), optimizer_->adam().m(), optimizer_->adam().v()};
}

StepResult Seq2SeqTrainer::step() {
    Seq2SeqGraph& G = *train_graph_;
    for (int64_t b = 0; b < G.batch; ++b)
        task_.fill(task_.sample(rng_), b, G.source_data(), G.mask_data(), G.decoder_input_data(), G.label_data());
    // The masks of a step follow from (seed, step), so a resumed run draws the same ones.
    G.set_dropout_seed(options_.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(steps_done()));
    train_exec_->run(pool_);
    optimizer_->gather(G.graph, G.grads, true);
    return optimizer_->step(G.loss_value(), 1);
}

std::vector<std::string> Seq2SeqTrainer::answers(const std::vector<std::string>& texts, int32_t beams, DType type) {
    InferenceDecoder decoder(seq2seq_model_bytes(*model_, ReverseTask::model_vocabulary(), type), beams);
    std::vector<std::string> out;
    out.reserve(texts.size());
    for (const std::string& text : texts) {
        std::vector<int32_t> source = ReverseTask::encode(text);
        source.push_back(ReverseTask::kEos);
        out.push_back(ReverseTask::decode(decoder.decode(source, beams, pool_)));
    }
    return out;
}

HeldOutMatch Seq2SeqTrainer::held_out_match(int32_t beams, DType type) {
    const std::vector<std::string>& texts = task_.held_out();
    return {ReverseTask::exact_match(texts, answers(texts, 1, type)),
            ReverseTask::exact_match(texts, answers(texts, beams, type))};
}

// Batches of held-out pairs; the rows past the last pair repeat it with every
// label ignored, and each batch's mean is weighted by its counted targets.
double Seq2SeqTrainer::held_out_loss() {
    Seq2SeqGraph& G = *eval_graph_;
    const std::vector<std::string>& texts = task_.held_out();
    const int64_t len = G.tgt_len;
    double sum = 0.0;
    int64_t targets = 0;
    for (size_t first = 0; first < texts.size(); first += static_cast<size_t>(G.batch)) {
        const auto count = static_cast<int64_t>(std::min(texts.size() - first, static_cast<size_t>(G.batch)));
        for (int64_t b = 0; b < G.batch; ++b) {
            task_.fill(texts[first + static_cast<size_t>(std::min(b, count - 1))], b, G.source_data(), G.mask_data(),
                       G.decoder_input_data(), G.label_data());
            if (b >= count) std::fill(G.label_data() + b * len, G.label_data() + (b + 1) * len, -1);
        }
        const auto counted = std::count_if(G.label_data(), G.label_data() + G.batch * len, [](int32_t l) { return l >= 0; });
        eval_exec_->run(pool_);
        sum += static_cast<double>(G.loss_value()) * static_cast<double>(counted);
        targets += counted;
    }
    return sum / static_cast<double>(targets);
}

}  // namespace kiln::train
