#pragma once
// What a block builder (gpt2_block.h, llama_block.h) needs besides the weights:
// the graph's inputs, how attention reads keys and values, and dropout. The same
// builder makes an inference session's graph (keys and values from the KV cache,
// no dropout) and a training graph (keys and values of the whole batch of
// sequences, dropout when training).
#include <cstdint>

#include "engine/graph/graph.h"

namespace kiln {

struct HeadLayout {
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;  // n_heads without grouped-query attention
    int64_t head_dim = 0;
    float scale = 0.0f;    // of the scores; 0: 1/sqrt(head_dim)
    float softcap = 0.0f;  // > 0: scores capped to softcap · tanh(s / softcap) (Gemma 2)
    int64_t window = 0;    // > 0: a token sees the last `window` positions only (sliding-window attention)
};

// How a block's attention sees keys and values.
class KeyValueReader {
public:
    virtual ~KeyValueReader() = default;
    // Attention of q over this layer's keys and values, given this batch's k and v
    // ([n_kv_heads * head_dim, n] each); returns [n_heads * head_dim, n].
    virtual NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& heads) = 0;
};

// Dropout on the residual stream (training); p = 0 leaves x as it is.
struct Dropout {
    NodeId seed = kNoNode;
    float p = 0.0f;
    NodeId apply(Graph& g, NodeId x) const;
};

// One stage of a model split by layers across processes (kiln --layer-split,
// engine/distributed/layer_pipeline.h): the graph computes blocks
// [first_layer, end_layer) only. A stage after the first starts from
// `hidden`, the previous stage's residual stream (F32 [dim, n]), instead of
// the embeddings; a stage before the last ends with its residual stream
// instead of the logits. The default is the whole model.
struct LayerStage {
    int64_t first_layer = 0;
    int64_t end_layer = -1;  // -1: through the last block
    NodeId hidden = kNoNode;
    // The blocks [begin, end) of a model of n_layers.
    int64_t begin() const noexcept { return first_layer; }
    int64_t end(int64_t n_layers) const noexcept { return end_layer < 0 ? n_layers : end_layer; }
    bool ends_model(int64_t n_layers) const noexcept { return end(n_layers) == n_layers; }
};

struct BlockContext {
    NodeId tokens = kNoNode;     // I32 [n]
    NodeId positions = kNoNode;  // I32 [n]
    int64_t n = 0;
    bool last_only = false;      // logits of the last row only
    int64_t n_ctx = 0;           // positions a sequence of the session may hold (0: the batch only, training)
    KeyValueReader* attention = nullptr;
    Dropout dropout;
    LayerStage stage;
};

// Keys and values from the batch itself: `batch` sequences of n / batch rows,
// each attending to its own rows (causally, or where key_mask allows: training,
// scoring whole windows, an encoder), with dropout on the attention weights.
class BatchKeyValues final : public KeyValueReader {
public:
    BatchKeyValues(int64_t batch, float dropout, NodeId dropout_seed, bool causal = true, NodeId key_mask = kNoNode)
        : batch_(batch), dropout_(dropout), seed_(dropout_seed), causal_(causal), key_mask_(key_mask) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& heads) override;

private:
    int64_t batch_;
    float dropout_;
    NodeId seed_;
    bool causal_;
    NodeId key_mask_;
};

}  // namespace kiln
