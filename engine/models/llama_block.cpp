#include "engine/models/llama_block.h"

#include "engine/ops/ops.h"

namespace kiln {

NodeId llama_forward(Graph& g, const arch::LlamaParams& p, const arch::LlamaTensors<NodeId>& w, const BlockContext& ctx,
                     const LlamaBlockScales& scales) {
    const auto scaled = [&](NodeId x, float factor) { return factor != 0.0f ? ops::scale(g, x, factor) : x; };
    const HeadLayout heads{p.n_heads, p.n_kv_heads, p.head_dim()};
    NodeId x = scaled(ops::get_rows(g, w.token_embd, ctx.tokens), scales.embedding);
    x = ctx.dropout.apply(g, x);
    for (size_t i = 0; i < w.layers.size(); ++i) {
        const arch::LlamaLayerTensors<NodeId>& L = w.layers[i];
        NodeId h = ops::rms_norm(g, x, L.attn_norm, p.norm_eps);
        NodeId q = ops::matmul(g, L.attn_q, h);
        NodeId k = ops::matmul(g, L.attn_k, h);
        const NodeId v = ops::matmul(g, L.attn_v, h);
        q = ops::rope(g, q, ctx.positions, p.n_heads, p.head_dim(), p.n_rot, p.rope_base);
        k = ops::rope(g, k, ctx.positions, p.n_kv_heads, p.head_dim(), p.n_rot, p.rope_base);
        const NodeId a = ctx.attention->attend(g, static_cast<int64_t>(i), q, k, v, heads);
        x = ops::add(g, x, ctx.dropout.apply(g, scaled(ops::matmul(g, L.attn_output, a), scales.residual)));
        h = ops::rms_norm(g, x, L.ffn_norm, p.norm_eps);
        const NodeId gate = ops::matmul(g, L.ffn_gate, h);
        const NodeId up = ops::matmul(g, L.ffn_up, h);
        x = ops::add(g, x, ctx.dropout.apply(g, scaled(ops::matmul(g, L.ffn_down, ops::swiglu(g, gate, up)), scales.residual)));
    }
    if (ctx.last_only && ctx.n > 1) x = ops::slice_rows(g, x, ctx.n - 1, 1);
    x = ops::rms_norm(g, x, w.output_norm, p.norm_eps);
    const NodeId logits = ops::matmul(g, w.output != kNoNode ? w.output : w.token_embd, x);
    return scales.logit != 0.0f ? ops::scale(g, logits, 1.0f / scales.logit) : logits;
}

}  // namespace kiln
