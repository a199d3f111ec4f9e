#pragma once
// The gpt2 forward pass, written once for inference sessions and training
// graphs: learned positions, pre-LayerNorm blocks, fused QKV, GELU (tanh) MLP,
// final LayerNorm, the head (token_embd when tied).
#include "engine/models/block_context.h"
#include "formats/arch/gpt2_arch.h"

namespace kiln {

// How the fused QKV projection splits into Q, K and V.
enum class FusedSplit {
    WeightRows,     // three products with row views of the weight (inference: no copy)
    OutputColumns,  // one product, its columns sliced (training: the gradient reaches the fused tensor)
};

// Appends the forward pass; returns the logits [n_vocab, n] ([n_vocab, 1] when ctx.last_only).
// Absent (kNoNode) biases are zero; an absent output is the tied token embedding.
NodeId gpt2_forward(Graph& g, const arch::Gpt2Params& p, const arch::Gpt2Tensors<NodeId>& w, const BlockContext& ctx,
                    FusedSplit split);

}  // namespace kiln
