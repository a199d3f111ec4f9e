#include "engine/models/slot_decoder.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/models/graph_cache.h"

namespace kiln {

SlotDecoderSession::SlotDecoderSession(int64_t n_vocab, int64_t n_layers, int64_t kv_dim, int64_t n_ctx,
                                       int64_t n_slots, Executor::Mode mode, CacheTypes cache_types, int64_t first_layer,
                                       int64_t hidden_width, bool ends_model)
    : n_vocab_(n_vocab),
      first_layer_(first_layer),
      hidden_width_(hidden_width),
      ends_model_(ends_model),
      mode_(mode),
      slots_(n_layers, kv_dim, n_slots, n_ctx, cache_types) {}

NodeId SlotDecoderSession::key_cache(Graph& g, int64_t layer) {
    return g.state(fmt::format("cache_k.{}", layer), slots_.cache_types().k, Shape::of({slots_.kv_dim(), slots_.cache_rows()}),
                   slots_.keys(layer - first_layer_));
}

NodeId SlotDecoderSession::value_cache(Graph& g, int64_t layer) {
    return g.state(fmt::format("cache_v.{}", layer), slots_.cache_types().v, Shape::of({slots_.kv_dim(), slots_.cache_rows()}),
                   slots_.values(layer - first_layer_));
}

SlotDecoderSession::Compiled& SlotDecoderSession::compiled(int64_t n, bool last_only) {
    return cached_graph(graphs_, std::pair{n, last_only}, [&](Compiled& c) {
        Graph& g = c.graph;
        c.in.n = n;
        c.in.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        c.in.positions = g.input("positions", DType::I32, Shape::of({n}));
        c.in.cache_rows = g.input("cache_rows", DType::I32, Shape::of({n}));
        c.in.mask = slots_.n_slots() > 1 ? g.input("slot_mask", DType::I8, Shape::of({slots_.cache_rows(), n})) : kNoNode;
        if (hidden_width_ > 0) c.in.hidden = g.input("hidden", DType::F32, Shape::of({hidden_width_, n}));
        c.logits = build_forward(g, c.in, last_only);
        g.mark_output(c.logits);
        c.executor = std::make_unique<Executor>(g, mode_);
    });
}

std::span<const float> SlotDecoderSession::run(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                               ThreadPool& pool, bool last_only, const float* hidden) {
    const auto n = static_cast<int64_t>(slots.size());
    if (n == 0) fail("model", "nothing to evaluate (no tokens)");
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab_) fail("model", "token id {} is outside the vocabulary of {}", t, n_vocab_);
    slots_.plan(slots, batch_);
    Compiled& c = compiled(n, last_only);
    Graph& g = c.graph;
    // A later stage of a layer split computes from `hidden`; its token input is unused.
    if (tokens.empty()) std::memset(g.node(c.in.tokens).data, 0, static_cast<size_t>(n) * sizeof(int32_t));
    else std::memcpy(g.node(c.in.tokens).data, tokens.data(), tokens.size_bytes());
    if (c.in.hidden != kNoNode) {
        if (hidden == nullptr) fail("model", "this stage of a layer split needs the previous stage's output");
        std::memcpy(g.node(c.in.hidden).data, hidden, static_cast<size_t>(hidden_width_ * n) * sizeof(float));
    }
    std::memcpy(g.node(c.in.positions).data, batch_.positions.data(), batch_.positions.size() * sizeof(int32_t));
    std::memcpy(g.node(c.in.cache_rows).data, batch_.cache_rows.data(), batch_.cache_rows.size() * sizeof(int32_t));
    if (c.in.mask != kNoNode) std::memcpy(g.node(c.in.mask).data, batch_.mask.data(), batch_.mask.size());
    c.executor->run(pool);
    slots_.commit(slots);
    const Node& logits = g.node(c.logits);
    return {logits.row(0), static_cast<size_t>(logits.shape.elements())};
}

std::span<const float> SlotDecoderSession::eval_stage(std::span<const int32_t> tokens, std::span<const float> hidden,
                                                      int64_t n, ThreadPool& pool, bool all_logits) {
    if (hidden_width_ > 0 ? hidden.size() != static_cast<size_t>(hidden_width_ * n) : tokens.size() != static_cast<size_t>(n))
        fail("model", "a stage of {} positions was given {} tokens and {} values", n, tokens.size(), hidden.size());
    zeros_.assign(static_cast<size_t>(n), 0);
    // Only the last stage may drop rows: the next stages need every position.
    return run(hidden_width_ > 0 ? std::span<const int32_t>() : tokens, zeros_, pool, ends_model_ && !all_logits,
               hidden.data());
}

std::span<const float> SlotDecoderSession::eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits) {
    zeros_.assign(tokens.size(), 0);
    return run(tokens, zeros_, pool, !all_logits);
}

std::span<const float> SlotDecoderSession::eval_slots(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                                      ThreadPool& pool) {
    if (slots.size() != tokens.size()) fail("model", "{} tokens but {} slots", tokens.size(), slots.size());
    return run(tokens, slots, pool, false);
}

}  // namespace kiln
