#include "engine/distributed/layer_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.h"
#include "engine/models/architectures.h"
#include "engine/models/decoder.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/slot_decoder.h"
#include "engine/runtime/thread_pool.h"

namespace kiln {

namespace {

// What rank 0 asks of the other stages, broadcast to all of them.
struct Command {
    enum Op : int64_t { Open = 1, Eval, Reset, Truncate, Close };
    int64_t op = 0;
    int64_t n = 0;           // Open: context; Eval: positions; Truncate: tokens kept
    int64_t all_logits = 0;  // Eval
    int64_t mode = 0, cache_k = 0, cache_v = 0;  // Open
};

void broadcast(Collective& ranks, Command& c) { ranks.broadcast(std::as_writable_bytes(std::span(&c, 1)), 0); }

uint64_t tensor_bytes(const GgufFile& file, const DecoderArch& arch, const LayerStage& stage) {
    uint64_t bytes = 0;
    for (const GgufTensor& t : file.tensors())
        if (layer_stage_uses(file, arch.shape().n_layers, stage, t.name)) bytes += t.data.size();
    return bytes;
}

[[noreturn]] void unsupported(std::string_view what) {
    fail("model", "--layer-split evaluates one sequence: {} is not available with it", what);
}

// Rank 0's session: its own stage, then the others in turn.
class PipelineSession final : public CausalSession {
public:
    PipelineSession(std::unique_ptr<SlotDecoderSession> local, Collective& ranks, int64_t n_vocab)
        : local_(std::move(local)), ranks_(ranks), n_vocab_(n_vocab) {}

    std::span<const float> eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits) override {
        const auto n = static_cast<int64_t>(tokens.size());
        if (n == 0) fail("model", "nothing to evaluate (no tokens)");
        // Rank 0's stage first: a token or context error stops here, before the others hear of it.
        const std::span<const float> hidden = local_->eval_stage(tokens, {}, n, pool, all_logits);
        Command c{Command::Eval, n, all_logits ? 1 : 0};
        broadcast(ranks_, c);
        ranks_.send(std::as_bytes(hidden), 1);
        logits_.resize(static_cast<size_t>(n_vocab_ * (all_logits ? n : 1)));
        ranks_.receive(std::as_writable_bytes(std::span(logits_)), ranks_.size() - 1);
        return logits_;
    }
    std::span<const float> eval_slots(std::span<const int32_t>, std::span<const int32_t>, ThreadPool&) override {
        unsupported("evaluating several sequences (beams, slots)");
    }
    void reorder(std::span<const int32_t>) override { unsupported("beam search"); }
    void truncate(int64_t slot, int64_t n_keep) override {
        local_->truncate(slot, n_keep);
        Command c{Command::Truncate, n_keep};
        broadcast(ranks_, c);
    }
    int64_t n_past(int64_t slot) const override { return local_->n_past(slot); }
    int64_t n_ctx() const noexcept override { return local_->n_ctx(); }
    int64_t n_slots() const noexcept override { return 1; }
    void reset() override {
        local_->reset();
        Command c{Command::Reset};
        broadcast(ranks_, c);
    }
    CacheShape cache_shape() const override { return local_->cache_shape(); }
    std::vector<std::byte> save_slot(int64_t) const override { unsupported("a prompt cache"); }
    void restore_slot(int64_t, std::span<const std::byte>, int64_t, int64_t) override { unsupported("a prompt cache"); }

private:
    std::unique_ptr<SlotDecoderSession> local_;
    Collective& ranks_;
    int64_t n_vocab_;
    std::vector<float> logits_;
};

// Rank 0's model: its stage; each new session opens one on every rank, and
// the model's end lets the other ranks go.
class PipelineLm final : public CausalLm {
public:
    PipelineLm(std::unique_ptr<DecoderLm> local, Collective& ranks) : local_(std::move(local)), ranks_(ranks) {}
    ~PipelineLm() override {
        Command c{Command::Close};
        broadcast(ranks_, c);
    }
    const ModelInfo& info() const noexcept override { return local_->info(); }
    const WeightResidence& weight_residence() const noexcept override { return local_->weight_residence(); }
    std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                               CacheTypes cache_types) const override {
        if (n_slots != 1) unsupported("evaluating several sequences (beams, slots)");
        auto local = local_->new_stage_session(n_ctx, mode, cache_types);
        Command c{Command::Open, n_ctx, 0, static_cast<int64_t>(mode), static_cast<int64_t>(cache_types.k),
                  static_cast<int64_t>(cache_types.v)};
        broadcast(ranks_, c);
        return std::make_unique<PipelineSession>(std::move(local), ranks_, local_->info().n_vocab);
    }

private:
    std::unique_ptr<DecoderLm> local_;
    Collective& ranks_;
};

}  // namespace

std::vector<LayerStage> plan_layer_split(const GgufFile& file, const DecoderArch& arch, std::span<const double> weights,
                                         int ranks) {
    const int64_t n_layers = arch.shape().n_layers;
    if (n_layers < ranks)
        throw CollectiveError("model", fmt::format("{} has {} blocks, fewer than the {} ranks of the layer split",
                                                   file.name(), n_layers, ranks));
    if (!weights.empty() && static_cast<int>(weights.size()) != ranks)
        throw CollectiveError("model", fmt::format("--layer-split gives {} proportions for {} ranks", weights.size(), ranks));
    std::vector<double> w(weights.begin(), weights.end());
    if (w.empty()) w.assign(static_cast<size_t>(ranks), 1.0);
    // A block's bytes; the whole-model tensors only the first stage places
    // (embeddings) and only the last (output norm, head). A tensor that every
    // stage places (rope factors) weighs the same everywhere and is left out.
    std::vector<double> block(static_cast<size_t>(n_layers), 0.0);
    double embeddings = 0, head = 0;
    const LayerStage first{0, 1}, last{n_layers - 1, n_layers};
    for (const GgufTensor& t : file.tensors()) {
        const auto bytes = static_cast<double>(t.data.size());
        bool in_block = false;
        for (int64_t i = 0; i < n_layers && !in_block; ++i)
            if (t.name.starts_with(fmt::format("blk.{}.", i))) {
                block[static_cast<size_t>(i)] += bytes;
                in_block = true;
            }
        if (in_block) continue;
        const bool in_first = layer_stage_uses(file, n_layers, first, t.name);
        const bool in_last = layer_stage_uses(file, n_layers, last, t.name);
        if (in_first && !in_last) embeddings += bytes;
        if (in_last && !in_first) head += bytes;
    }
    // Bytes before block i, rank 0's embeddings included.
    std::vector<double> before(static_cast<size_t>(n_layers + 1), embeddings);
    for (int64_t i = 0; i < n_layers; ++i)
        before[static_cast<size_t>(i + 1)] = before[static_cast<size_t>(i)] + block[static_cast<size_t>(i)];
    const double total = before.back() + head, weight_sum = std::accumulate(w.begin(), w.end(), 0.0);
    std::vector<int64_t> starts{0};
    double share = 0;
    for (int r = 1; r < ranks; ++r) {
        share += w[static_cast<size_t>(r - 1)];
        const double target = total * share / weight_sum;
        // The block boundary nearest the target that leaves every rank a block.
        const int64_t lo = starts.back() + 1, hi = n_layers - (ranks - r);
        int64_t best = lo;
        for (int64_t i = lo; i <= hi; ++i)
            if (std::abs(before[static_cast<size_t>(i)] - target) < std::abs(before[static_cast<size_t>(best)] - target))
                best = i;
        starts.push_back(best);
    }
    starts.push_back(n_layers);
    std::vector<LayerStage> plan;
    for (int r = 0; r < ranks; ++r) plan.push_back(LayerStage{starts[static_cast<size_t>(r)], starts[static_cast<size_t>(r + 1)]});
    return plan;
}

uint64_t layer_stage_bytes(const GgufFile& file, const DecoderArch& arch, const LayerStage& stage) {
    return tensor_bytes(file, arch, stage);
}

std::string describe_layer_split(const GgufFile& file, const DecoderArch& arch, std::span<const LayerStage> plan) {
    std::string out;
    for (size_t r = 0; r < plan.size(); ++r)
        out += fmt::format("{}blocks {}-{} on rank {} ({:.1f} MiB)", r == 0 ? "" : ", ", plan[r].begin(),
                           plan[r].end(arch.shape().n_layers) - 1, r,
                           static_cast<double>(layer_stage_bytes(file, arch, plan[r])) / 1048576.0);
    return out;
}

std::unique_ptr<CausalLm> load_layer_split(std::shared_ptr<const GgufFile> file, WeightPlacement placement,
                                           Collective& ranks, std::span<const double> weights,
                                           std::string* description) {
    std::unique_ptr<DecoderLm> local;
    try {
        local = load_decoder_stage(file, placement, [&](const DecoderArch& arch) {
            if (!arch.builds_stages())
                throw CollectiveError("model", fmt::format("architecture '{}' cannot be split by layers", arch.name()));
            std::vector<LayerStage> stages = plan_layer_split(*file, arch, weights, ranks.size());
            if (description != nullptr) *description = describe_layer_split(*file, arch, stages);
            return stages[static_cast<size_t>(ranks.rank())];
        });
    } catch (const CollectiveError&) {
        throw;
    } catch (const Error& e) {
        // The same file on every rank (the tools compare hashes first): every rank fails alike.
        throw CollectiveError(e.component(), std::string_view(e.what()).substr(e.component().size() + 3));
    }
    if (ranks.size() == 1) return local;  // one rank holds the whole model
    if (ranks.rank() == 0) return std::make_unique<PipelineLm>(std::move(local), ranks);
    return local;
}

void serve_layer_split(CausalLm& stage_model, Collective& ranks, ThreadPool& pool) {
    auto& model = dynamic_cast<DecoderLm&>(stage_model);
    const bool last = ranks.rank() == ranks.size() - 1;
    const int64_t width = model.arch().hidden_width(), n_vocab = model.info().n_vocab;
    std::unique_ptr<SlotDecoderSession> session;
    std::vector<float> hidden;
    for (;;) {
        Command c;
        broadcast(ranks, c);
        switch (c.op) {
        case Command::Open:
            session = model.new_stage_session(c.n, static_cast<Executor::Mode>(c.mode),
                                              CacheTypes{static_cast<DType>(c.cache_k), static_cast<DType>(c.cache_v)});
            break;
        case Command::Eval: {
            if (!session) fail("model", "rank 0 asked for an evaluation before opening a session");
            hidden.resize(static_cast<size_t>(width * c.n));
            ranks.receive(std::as_writable_bytes(std::span(hidden)), ranks.rank() - 1);
            const std::span<const float> out = session->eval_stage({}, hidden, c.n, pool, c.all_logits != 0);
            if (last) {
                const size_t expected = static_cast<size_t>(n_vocab * (c.all_logits != 0 ? c.n : 1));
                if (out.size() != expected) fail("model", "the last stage made {} logits, not {}", out.size(), expected);
            }
            ranks.send(std::as_bytes(out), last ? 0 : ranks.rank() + 1);
            break;
        }
        case Command::Reset:
            if (session) session->reset();
            break;
        case Command::Truncate:
            if (session) session->truncate(0, c.n);
            break;
        case Command::Close:
            return;
        default:
            fail("model", "rank 0 sent an unknown layer-split command {}", c.op);
        }
    }
}

}  // namespace kiln
