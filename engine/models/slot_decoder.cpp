#include "engine/models/slot_decoder.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/models/graph_cache.h"

namespace kiln {

SlotDecoderSession::SlotDecoderSession(int64_t n_vocab, int64_t n_layers, int64_t kv_dim, int64_t n_ctx,
                                       int64_t n_slots, Executor::Mode mode, CacheTypes cache_types)
    : n_vocab_(n_vocab), mode_(mode), slots_(n_layers, kv_dim, n_slots, n_ctx, cache_types) {}

NodeId SlotDecoderSession::key_cache(Graph& g, int64_t layer) {
    return g.state(fmt::format("cache_k.{}", layer), slots_.cache_types().k, Shape::of({slots_.kv_dim(), slots_.cache_rows()}),
                   slots_.keys(layer));
}

NodeId SlotDecoderSession::value_cache(Graph& g, int64_t layer) {
    return g.state(fmt::format("cache_v.{}", layer), slots_.cache_types().v, Shape::of({slots_.kv_dim(), slots_.cache_rows()}),
                   slots_.values(layer));
}

SlotDecoderSession::Compiled& SlotDecoderSession::compiled(int64_t n, bool last_only) {
    return cached_graph(graphs_, std::pair{n, last_only}, [&](Compiled& c) {
        Graph& g = c.graph;
        c.in.n = n;
        c.in.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        c.in.positions = g.input("positions", DType::I32, Shape::of({n}));
        c.in.cache_rows = g.input("cache_rows", DType::I32, Shape::of({n}));
        c.in.mask = slots_.n_slots() > 1 ? g.input("slot_mask", DType::I8, Shape::of({slots_.cache_rows(), n})) : kNoNode;
        c.logits = build_forward(g, c.in, last_only);
        g.mark_output(c.logits);
        c.executor = std::make_unique<Executor>(g, mode_);
    });
}

std::span<const float> SlotDecoderSession::run(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                               ThreadPool& pool, bool last_only) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) fail("model", "nothing to evaluate (no tokens)");
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab_) fail("model", "token id {} is outside the vocabulary of {}", t, n_vocab_);
    slots_.plan(slots, batch_);
    Compiled& c = compiled(n, last_only);
    Graph& g = c.graph;
    std::memcpy(g.node(c.in.tokens).data, tokens.data(), tokens.size_bytes());
    std::memcpy(g.node(c.in.positions).data, batch_.positions.data(), batch_.positions.size() * sizeof(int32_t));
    std::memcpy(g.node(c.in.cache_rows).data, batch_.cache_rows.data(), batch_.cache_rows.size() * sizeof(int32_t));
    if (c.in.mask != kNoNode) std::memcpy(g.node(c.in.mask).data, batch_.mask.data(), batch_.mask.size());
    c.executor->run(pool);
    slots_.commit(slots);
    const Node& logits = g.node(c.logits);
    return {logits.row(0), static_cast<size_t>(logits.shape.elements())};
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
