#pragma once
// The llama forward pass, written once for inference sessions and training
// graphs: RMSNorm, RoPE on Q and K, grouped-query attention, SwiGLU MLP, the
// head (token_embd when tied).
#include "engine/models/block_context.h"
#include "formats/arch/llama_arch.h"

namespace kiln {

// Appends the forward pass; returns the logits [n_vocab, n] ([n_vocab, 1] when ctx.last_only).
NodeId llama_forward(Graph& g, const arch::LlamaParams& p, const arch::LlamaTensors<NodeId>& w, const BlockContext& ctx);

}  // namespace kiln
