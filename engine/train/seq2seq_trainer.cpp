#include "engine/train/seq2seq_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/train/seq2seq_inference.h"
#include "engine/train/train_log.h"

namespace kiln::train {

namespace {

std::unique_ptr<Seq2SeqModel> fresh_model(const Seq2SeqConfig& config, uint64_t seed) {
    auto model = std::make_unique<Seq2SeqModel>(config);
    Rng init = initialization_rng(seed);
    model->initialize(init);
    return model;
}

Seq2SeqTrainOptions fitted(Seq2SeqTrainOptions options, const ReverseTask& task) {
    options.model.vocab = static_cast<int64_t>(ReverseTask::vocabulary().size());
    options.model.context = std::max(options.model.context, task.sequence_length());
    return options;
}

// The targets a batch's loss counts (labels of -1 are ignored).
double counted_labels(Seq2SeqGraph& G) {
    return static_cast<double>(std::count_if(G.label_data(), G.label_data() + G.batch * G.tgt_len,
                                             [](int32_t l) { return l >= 0; }));
}

}  // namespace

Seq2SeqTrainer::Seq2SeqTrainer(const Seq2SeqTrainOptions& options, const ReverseTask& task, ThreadPool& pool)
    : options_(fitted(options, task)),
      rows_(batch_rows(options_.batch, options_.collective)),
      task_(task),
      pool_(pool),
      model_(fresh_model(options_.model, options_.seed)),
      train_graph_(build_seq2seq_graph(*model_, rows_.size(), task.sequence_length(), task.sequence_length(), true,
                                       options_.dropout)),
      eval_graph_(build_seq2seq_graph(*model_, rows_.size(), task.sequence_length(), task.sequence_length(), false)),
      train_exec_(std::make_unique<Executor>(train_graph_->graph)),
      eval_exec_(std::make_unique<Executor>(eval_graph_->graph)),
      core_(*model_, options_.optimizer, options_.seed, 1, pool, options_.collective) {
    train_graph_->first_sequence = rows_.begin;
    train_graph_->sequences = rows_.size();
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
    core_.restore(checkpoint.data, checkpoint.training);
}

void Seq2SeqTrainer::restore(const std::filesystem::path& path) {
    const LoadedSeq2Seq checkpoint = read_seq2seq_checkpoint(path);
    if (!checkpoint.training)
        fail("train", "{} is a model, not a training checkpoint (no optimizer state)", path.string());
    if (checkpoint.vocabulary != ReverseTask::vocabulary())
        fail("train", "{} was not trained on the reversal task (another vocabulary)", path.string());
    restore(checkpoint);
}

TrainingState Seq2SeqTrainer::training_state() const { return core_.training_state(); }

StepResult Seq2SeqTrainer::step() {
    Seq2SeqGraph& G = *train_graph_;
    return core_.step(G, *train_exec_, [&](Rng& rng) {
        // Every row is drawn (the generator as one process has it); this rank fills its own.
        for (int64_t b = 0; b < options_.batch; ++b) {
            const auto sample = task_.sample(rng);
            if (b >= rows_.begin && b < rows_.end)
                task_.fill(sample, b - rows_.begin, G.source_data(), G.mask_data(), G.decoder_input_data(),
                           G.label_data());
        }
        return counted_labels(G);
    });
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

Evaluation Seq2SeqTrainer::evaluate() {
    Evaluation e;
    e.val_loss = held_out_loss();
    const HeldOutMatch match = held_out_match(options_.eval_beams, options_.eval_type);
    e.greedy_match = match.greedy;
    e.beam_match = match.beam;
    return e;
}

HeldOutMatch Seq2SeqTrainer::held_out_match(int32_t beams, DType type) {
    const std::vector<std::string>& all = task_.held_out();
    Collective& ranks = core_.collective();
    if (ranks.size() == 1)
        return {ReverseTask::exact_match(all, answers(all, 1, type)), ReverseTask::exact_match(all, answers(all, beams, type))};
    // Data-parallel: each rank decodes its share of the strings; the matches add up.
    const Share mine = share_of(static_cast<int64_t>(all.size()), ranks.rank(), ranks.size());
    const std::vector<std::string> texts(all.begin() + mine.begin, all.begin() + mine.end);
    double matches[2] = {0.0, 0.0};
    if (!texts.empty()) {
        const auto n = static_cast<double>(texts.size());
        matches[0] = std::round(ReverseTask::exact_match(texts, answers(texts, 1, type)) * n);
        matches[1] = std::round(ReverseTask::exact_match(texts, answers(texts, beams, type)) * n);
    }
    ranks.sum(std::span(matches));
    return {matches[0] / static_cast<double>(all.size()), matches[1] / static_cast<double>(all.size())};
}

// Batches of held-out pairs; the rows past the last pair repeat it with every
// label ignored, and each batch's mean is weighted by its counted targets.
// Data-parallel: each rank fills and runs its rows of every batch.
double Seq2SeqTrainer::held_out_loss() {
    Seq2SeqGraph& G = *eval_graph_;
    const std::vector<std::string>& texts = task_.held_out();
    const int64_t len = G.tgt_len, batch = options_.batch;
    const auto batches = static_cast<int64_t>((texts.size() + static_cast<size_t>(batch) - 1) / static_cast<size_t>(batch));
    return core_.mean_loss(G, *eval_exec_, batches, [&](int64_t index) {
        const size_t first = static_cast<size_t>(index * batch);
        const auto count = static_cast<int64_t>(std::min(texts.size() - first, static_cast<size_t>(batch)));
        for (int64_t b = rows_.begin; b < rows_.end; ++b) {
            const int64_t row = b - rows_.begin;
            task_.fill(texts[first + static_cast<size_t>(std::min(b, count - 1))], row, G.source_data(), G.mask_data(),
                       G.decoder_input_data(), G.label_data());
            if (b >= count) std::fill(G.label_data() + row * len, G.label_data() + (row + 1) * len, -1);
        }
        return counted_labels(G);
    });
}

void Seq2SeqTrainer::write(const std::filesystem::path& path, DType type, const TrainingState* training) const {
    write_seq2seq_model(path, *model_, ReverseTask::model_vocabulary(), type, training);
}

std::string Seq2SeqTrainer::description() const {
    const Seq2SeqConfig& c = model_->config();
    return fmt::format("reverse strings of 1..{} letters ({} held out); encoder-decoder {}+{} layers, {} heads, width {}, {}",
                       task_.sequence_length() - 1, task_.held_out().size(), c.encoder_layers, c.decoder_layers, c.heads,
                       c.width, c.norm_first ? "pre-LN" : "post-LN");
}

std::string Seq2SeqTrainer::evaluation_line(const Evaluation& e, double loss) const {
    return fmt::format("loss {:.4f}, held-out loss {:.4f}, exact match {:.2f}% greedy, {:.2f}% with {} beams", loss,
                       e.val_loss.value_or(NAN), 100.0 * e.greedy_match.value_or(0.0), 100.0 * e.beam_match.value_or(0.0),
                       options_.eval_beams);
}

std::string Seq2SeqTrainer::outcome(const Evaluation& last, int64_t, double seconds) const {
    return fmt::format("held-out exact match {:.2f}% greedy, {:.2f}% with {} beams, after {}",
                       100.0 * last.greedy_match.value_or(0.0), 100.0 * last.beam_match.value_or(0.0), options_.eval_beams,
                       format_duration(seconds));
}

}  // namespace kiln::train
