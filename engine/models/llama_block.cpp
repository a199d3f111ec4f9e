#include "engine/models/llama_block.h"

#include "engine/ops/ops.h"

namespace kiln {

kernels::RopeSpec llama_rope_spec(const arch::LlamaParams& p, int64_t n_heads, kernels::RopeStyle style) {
    kernels::RopeSpec s;
    s.n_heads = n_heads;
    s.head_dim = p.head_dim();
    s.n_rot = p.n_rot;
    s.freq_base = p.rope_base;
    s.style = style;
    using Type = arch::RopeScaling::Type;
    const arch::RopeScaling& r = p.rope_scaling;
    if (r.type != Type::None) s.freq_scale = 1.0f / r.factor;
    if (r.type == Type::Yarn) {
        s.ext_factor = 1.0f;
        s.n_ctx_orig = r.original_context;
    }
    s.attn_factor = r.attn_factor;
    return s;
}

NodeId llama_forward(Graph& g, const arch::LlamaParams& p, const arch::LlamaTensors<NodeId>& w, const BlockContext& ctx,
                     const LlamaBlockScales& scales, kernels::RopeStyle rope_style) {
    const auto scaled = [&](NodeId x, float factor) { return factor != 0.0f ? ops::scale(g, x, factor) : x; };
    const auto biased = [&](NodeId y, NodeId bias) { return bias != kNoNode ? ops::add(g, y, bias) : y; };
    const HeadLayout heads{p.n_heads, p.n_kv_heads, p.head_dim()};
    const kernels::RopeSpec q_rope = llama_rope_spec(p, p.n_heads, rope_style);
    const kernels::RopeSpec k_rope = llama_rope_spec(p, p.n_kv_heads, rope_style);
    const auto n_layers = static_cast<int64_t>(w.layers.size());
    NodeId x = ctx.stage.hidden;
    if (x == kNoNode) {
        x = scaled(ops::get_rows(g, w.token_embd, ctx.tokens), scales.embedding);
        x = ctx.dropout.apply(g, x);
    }
    for (auto i = static_cast<size_t>(ctx.stage.begin()); i < static_cast<size_t>(ctx.stage.end(n_layers)); ++i) {
        const arch::LlamaLayerTensors<NodeId>& L = w.layers[i];
        const arch::LlamaLayerBiases<NodeId> B =
            i < w.biases.size() ? w.biases[i] : arch::LlamaLayerBiases<NodeId>{kNoNode, kNoNode, kNoNode, kNoNode,
                                                                              kNoNode, kNoNode, kNoNode};
        NodeId h = ops::rms_norm(g, x, L.attn_norm, p.norm_eps);
        NodeId q = biased(ops::matmul(g, L.attn_q, h), B.attn_q);
        NodeId k = biased(ops::matmul(g, L.attn_k, h), B.attn_k);
        const NodeId v = biased(ops::matmul(g, L.attn_v, h), B.attn_v);
        q = ops::rope(g, q, ctx.positions, q_rope, w.rope_freqs);
        k = ops::rope(g, k, ctx.positions, k_rope, w.rope_freqs);
        const NodeId a = ctx.attention->attend(g, static_cast<int64_t>(i), q, k, v, heads);
        const NodeId attn_out = biased(ops::matmul(g, L.attn_output, a), B.attn_output);
        x = ops::add(g, x, ctx.dropout.apply(g, scaled(attn_out, scales.residual)));
        h = ops::rms_norm(g, x, L.ffn_norm, p.norm_eps);
        const NodeId gate = biased(ops::matmul(g, L.ffn_gate, h), B.ffn_gate);
        const NodeId up = biased(ops::matmul(g, L.ffn_up, h), B.ffn_up);
        const NodeId down = biased(ops::matmul(g, L.ffn_down, ops::swiglu(g, gate, up)), B.ffn_down);
        x = ops::add(g, x, ctx.dropout.apply(g, scaled(down, scales.residual)));
    }
    if (!ctx.stage.ends_model(n_layers)) return x;  // the next stage's input
    if (ctx.last_only && ctx.n > 1) x = ops::slice_rows(g, x, ctx.n - 1, 1);
    x = ops::rms_norm(g, x, w.output_norm, p.norm_eps);
    const NodeId logits = ops::matmul(g, w.output != kNoNode ? w.output : w.token_embd, x);
    return scales.logit != 0.0f ? ops::scale(g, logits, 1.0f / scales.logit) : logits;
}

}  // namespace kiln
