#pragma once
// The llama forward pass, written once for inference sessions and training
// graphs: RMSNorm, RoPE on Q and K, grouped-query attention, SwiGLU MLP, the
// head (token_embd when tied).
#include "engine/kernels/rope_spec.h"
#include "engine/models/block_context.h"
#include "formats/arch/llama_arch.h"

namespace kiln {

// The scalings some of llama's family put into the same block (as llama.cpp's
// build_llama does for MiniCPM and Granite); 0 leaves that place unscaled.
struct LlamaBlockScales {
    float embedding = 0.0f;  // the token embeddings are multiplied by it
    float residual = 0.0f;   // each sublayer's output, before it joins the residual stream
    float logit = 0.0f;      // the logits are divided by it
};

// The rotation of `n_heads` heads as the file's rope keys say (scaling type,
// factor, original context, attn_factor), with llama.cpp's YaRN defaults
// (ext_factor 1 when the type is yarn, beta_fast 32, beta_slow 1).
kernels::RopeSpec llama_rope_spec(const arch::LlamaParams& p, int64_t n_heads, kernels::RopeStyle style);

// Appends the forward pass; returns the logits [n_vocab, n] ([n_vocab, 1] when ctx.last_only).
// `rope_style`: llama's adjacent pairs, or NEOX halves (qwen2).
NodeId llama_forward(Graph& g, const arch::LlamaParams& p, const arch::LlamaTensors<NodeId>& w, const BlockContext& ctx,
                     const LlamaBlockScales& scales = {}, kernels::RopeStyle rope_style = kernels::RopeStyle::Adjacent);

}  // namespace kiln
