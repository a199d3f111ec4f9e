#pragma once
// The encoder-decoder transformer's forward pass, written once for inference
// sessions (transformer.h: KV caches, cross-attention keys computed once per
// source) and training graphs (engine/train/seq2seq_model.h: whole batches,
// dropout): embeddings scaled by sqrt(d) plus sinusoidal positions, post-LN
// (the paper) or pre-LN residual sublayers, ReLU or exact-GELU feed-forward.
#include <functional>

#include "engine/models/block_context.h"
#include "formats/arch/transformer_arch.h"

namespace kiln {

// How a decoder block's cross-attention sees the encoder's keys and values.
class CrossKeyValueReader {
public:
    virtual ~CrossKeyValueReader() = default;
    // Attention of q ([dim, n]) over the encoder output of this layer, given the
    // layer's cross-attention weights (whose k and v project the encoder output).
    virtual NodeId attend(Graph& g, int64_t layer, NodeId q, const arch::AttentionTensors<NodeId>& w,
                          const HeadLayout& heads) = 0;
};

// One stack's inputs: token ids, the sinusoidal rows to add ([dim, n], made
// when the builder asks, so a training graph keeps its node order), and its
// self-attention.
struct StackInputs {
    NodeId tokens = kNoNode;
    std::function<NodeId(Graph&)> positions;
    KeyValueReader* self_attention = nullptr;
};

// The encoder: its output after the stack's final norm (when the model has one).
NodeId transformer_encode(Graph& g, const arch::TransformerParams& p, const arch::TransformerTensors<NodeId>& w,
                          const StackInputs& in, const Dropout& dropout);

// The decoder: logits [n_vocab, n].
NodeId transformer_decode(Graph& g, const arch::TransformerParams& p, const arch::TransformerTensors<NodeId>& w,
                          const StackInputs& in, CrossKeyValueReader& cross, const Dropout& dropout);

// Cross-attention keys and values projected from a whole batch's encoder output
// (`memory`, [dim, batch * source length]) in the decoder's graph (training).
class BatchCrossKeyValues final : public CrossKeyValueReader {
public:
    BatchCrossKeyValues(NodeId memory, int64_t batch, NodeId source_mask, float dropout, NodeId dropout_seed)
        : memory_(memory), batch_(batch), mask_(source_mask), dropout_(dropout), seed_(dropout_seed) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, const arch::AttentionTensors<NodeId>& w,
                  const HeadLayout& heads) override;

private:
    NodeId memory_;
    int64_t batch_;
    NodeId mask_;
    float dropout_;
    NodeId seed_;
};

}  // namespace kiln
