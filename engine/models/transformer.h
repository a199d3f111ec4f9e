#pragma once
// The encoder-decoder Transformer of "Attention Is All You Need"
// (general.architecture = "transformer"; tensor names and keys in
// docs/architectures.md): token embeddings scaled by sqrt(d_model) plus sinusoidal
// positions, N encoder layers (self-attention over the non-padding source),
// N decoder layers (causal self-attention, cross-attention to the encoder
// output, FFN), post-LN as in the paper or pre-LN, ReLU or GELU, and a
// projection to the vocabulary, which source and target share.
//
// A session encodes a batch of sources once, keeping every decoder layer's
// cross-attention keys and values of them; its decoder then advances any mix
// of target sequences (slots) with a self-attention KV cache, each slot
// reading the encoder output of the source assigned to it.
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/graph/graph.h"
#include "engine/models/causal_lm.h"
#include "engine/models/resident_weights.h"
#include "engine/models/sequence_slots.h"
#include "engine/models/weight_leaves.h"
#include "formats/arch/transformer_arch.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

class ThreadPool;

// The descriptor's hyper-parameters and the special tokens a session needs.
struct TransformerConfig : arch::TransformerParams {
    int32_t bos = -1, eos = -1, pad = -1;  // decoder start, end of sequence, padding (-1: none)
};

// Reads the hyper-parameters and special tokens and checks every tensor's
// presence, type and shape (what TransformerModel does before placing weights).
TransformerConfig check_transformer(const GgufFile& file);

class TransformerModel {
public:
    // Checks the hyper-parameters and every tensor's presence, type and shape.
    // Places the weights as `placement` asks (weight_placement.h).
    explicit TransformerModel(std::shared_ptr<const GgufFile> file, WeightPlacement placement = {});

    const TransformerConfig& config() const noexcept { return config_; }
    const ModelInfo& info() const noexcept { return info_; }
    const WeightResidence& weight_residence() const noexcept { return placement_->residence(); }
    // The model's tensors as leaves of g (absent optional ones: kNoNode).
    arch::TransformerTensors<NodeId> leaves(Graph& g) const;
    // The sinusoidal position table, [dim, n_ctx] row-major.
    const std::vector<float>& positions_table() const noexcept { return positions_; }

private:
    std::shared_ptr<const GgufFile> file_;
    TransformerConfig config_;
    ModelInfo info_;
    std::unique_ptr<ResidentWeights> placement_;
    std::unique_ptr<WeightLeaves> leaves_;
    std::vector<float> positions_;
};

class TransformerSession {
public:
    // Room for n_sources sources of up to max_source tokens and n_slots target
    // sequences of up to max_target tokens (both at most the model's n_ctx).
    TransformerSession(const TransformerModel& model, int64_t n_sources, int64_t max_source, int64_t n_slots,
                       int64_t max_target, Executor::Mode mode = Executor::Mode::Fast);

    // Runs the encoder over the sources in one batch (padded to the longest,
    // padding masked) and empties the decoder; slot i reads source i (or
    // source 0 when there are fewer sources than slots).
    void encode(std::span<const std::vector<int32_t>> sources, ThreadPool& pool);
    // Makes `slot` read the encoder output of source `source`.
    void set_source(int64_t slot, int64_t source);

    // Appends tokens[i] to target slot slots[i]; logits of every token [n, n_vocab].
    std::span<const float> decode(std::span<const int32_t> tokens, std::span<const int32_t> slots, ThreadPool& pool);
    // Slot i continues the target of slot parents[i] (beam search).
    void reorder(std::span<const int32_t> parents);
    int64_t n_past(int64_t slot) const { return targets_.n_past(slot); }
    int64_t n_slots() const noexcept { return targets_.n_slots(); }

private:
    struct EncoderGraph {
        Graph graph;
        NodeId tokens, positions, limits, mask, cache_rows;
        std::unique_ptr<Executor> executor;
    };
    struct DecoderGraph {
        Graph graph;
        NodeId tokens, positions, cache_rows, self_mask, cross_limits, cross_mask, logits;
        std::unique_ptr<Executor> executor;
    };
    EncoderGraph& encoder_graph(int64_t n_sources, int64_t length);
    DecoderGraph& decoder_graph(int64_t n);

    const TransformerModel& model_;
    Executor::Mode mode_;
    int64_t n_sources_, max_source_;
    SequenceSlots targets_;
    // Per decoder layer: keys and values of every source's encoder output,
    // source s in rows [s * max_source, s * max_source + length_s).
    std::vector<std::vector<float>> cross_k_, cross_v_;
    std::vector<int64_t> source_length_;  // tokens of each encoded source (0: none)
    std::vector<int64_t> source_of_slot_;
    SlotBatch batch_;
    std::map<std::pair<int64_t, int64_t>, EncoderGraph> encoders_;
    std::map<int64_t, DecoderGraph> decoders_;
};

}  // namespace kiln
