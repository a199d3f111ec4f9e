#pragma once
// One decoder-only architecture as the loader sees it: its hyper-parameters
// and tensors checked against a file (the descriptor in formats/arch/), and its
// forward pass (the block builder) over a graph's weight leaves. The loader
// (architectures.h) wraps it in a DecoderLm, which owns the file, the weight
// placement and the sessions; an architecture supplies only this.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/models/block_context.h"
#include "engine/models/weight_leaves.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

// What a session needs to know of a decoder.
struct DecoderShape {
    int64_t n_vocab = 0;
    int64_t n_layers = 0;
    int64_t kv_dim = 0;          // one cached key (or value) row
    int64_t n_ctx_train = 0;
    bool learned_positions = false;  // no position past n_ctx_train exists
    int64_t head_dim = 0;        // one head's share of a cached row (block-quantized caches need whole blocks)
};

class DecoderArch {
public:
    virtual ~DecoderArch() = default;
    const std::string& name() const noexcept { return name_; }
    const DecoderShape& shape() const noexcept { return shape_; }
    // Appends the forward pass (logits [n_vocab, n], or [n_vocab, 1] when ctx.last_only).
    virtual NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const = 0;
    // The architecture's tensors for this model's hyper-parameters, in file order.
    virtual std::vector<arch::TensorSpec> tensor_specs() const = 0;
    // Whether forward() builds one stage of a layer split (BlockContext::stage);
    // the others build the whole model only.
    virtual bool builds_stages() const noexcept { return false; }
    // The width of the residual stream a stage hands to the next.
    int64_t hidden_width() const noexcept { return hidden_width_; }

protected:
    DecoderArch(std::string name, DecoderShape shape, int64_t hidden_width = 0)
        : name_(std::move(name)), shape_(shape), hidden_width_(hidden_width) {}

private:
    std::string name_;
    DecoderShape shape_;
    int64_t hidden_width_;
};

}  // namespace kiln
