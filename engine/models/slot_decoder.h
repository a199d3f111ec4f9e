#pragma once
// The part of a decoder-only session every architecture shares: the slots'
// KV caches, one compiled graph per batch shape, and filling the inputs.
// An architecture supplies only its forward pass (build_forward).
#include <map>
#include <memory>
#include <utility>

#include "engine/graph/graph.h"
#include "engine/models/causal_lm.h"
#include "engine/models/sequence_slots.h"

namespace kiln {

class SlotDecoderSession : public CausalSession {
public:
    std::span<const float> eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits) override;
    std::span<const float> eval_slots(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                      ThreadPool& pool) override;
    void reorder(std::span<const int32_t> parents) override { slots_.reorder(parents); }
    void truncate(int64_t slot, int64_t n_keep) override { slots_.truncate(slot, n_keep); }
    int64_t n_past(int64_t slot) const override { return slots_.n_past(slot); }
    int64_t n_ctx() const noexcept override { return slots_.n_ctx(); }
    int64_t n_slots() const noexcept override { return slots_.n_slots(); }
    void reset() override { slots_.clear(); }
    CacheShape cache_shape() const override {
        return {slots_.n_layers(), slots_.kv_dim(), slots_.cache_types(), slots_.row_bytes()};
    }
    std::vector<std::byte> save_slot(int64_t slot) const override { return slots_.slot_rows(slot); }
    void restore_slot(int64_t slot, std::span<const std::byte> rows, int64_t n_saved, int64_t n_keep) override {
        slots_.restore_slot_rows(slot, rows, n_saved, n_keep);
    }

    // A stage of a layer split (DecoderLm over a LayerStage): appends n
    // positions to slot 0, starting from `hidden` (the previous stage's
    // output, [width, n]) or, in the first stage, from `tokens`; returns this
    // stage's output: its residual stream [width, n], or in the last stage the
    // logits (every row's with all_logits, else the last row's).
    std::span<const float> eval_stage(std::span<const int32_t> tokens, std::span<const float> hidden, int64_t n,
                                      ThreadPool& pool, bool all_logits);

protected:
    // The graph inputs of a batch of n tokens. mask is kNoNode with one slot;
    // hidden is the previous stage's output in a stage after the first.
    struct Inputs {
        NodeId tokens, positions, cache_rows, mask;
        int64_t n;
        NodeId hidden = kNoNode;
    };
    // n_layers caches, for layers first_layer .. first_layer + n_layers - 1
    // (a stage of a layer split holds only its own). hidden_width > 0: the
    // graphs take the previous stage's residual stream of that width.
    SlotDecoderSession(int64_t n_vocab, int64_t n_layers, int64_t kv_dim, int64_t n_ctx, int64_t n_slots,
                       Executor::Mode mode, CacheTypes cache_types, int64_t first_layer = 0, int64_t hidden_width = 0,
                       bool ends_model = true);

    // Appends the forward pass to g; returns the logits node: [n_vocab, n], or
    // [n_vocab, 1] for the last token alone when last_only.
    virtual NodeId build_forward(Graph& g, const Inputs& in, bool last_only) = 0;

    // Per-layer cache leaves of a graph ([kv_dim, n_slots * n_ctx]).
    NodeId key_cache(Graph& g, int64_t layer);
    NodeId value_cache(Graph& g, int64_t layer);

private:
    struct Compiled {
        Graph graph;
        Inputs in{};
        NodeId logits = kNoNode;
        std::unique_ptr<Executor> executor;
    };
    Compiled& compiled(int64_t n, bool last_only);
    std::span<const float> run(std::span<const int32_t> tokens, std::span<const int32_t> slots, ThreadPool& pool,
                               bool last_only, const float* hidden = nullptr);

    int64_t n_vocab_;
    int64_t first_layer_, hidden_width_;
    bool ends_model_;
    Executor::Mode mode_;
    SequenceSlots slots_;
    SlotBatch batch_;
    std::vector<int32_t> zeros_;  // slot 0 for every token of eval()
    std::map<std::pair<int64_t, bool>, Compiled> graphs_;
};

}  // namespace kiln
