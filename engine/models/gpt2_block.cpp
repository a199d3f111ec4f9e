#include "engine/models/gpt2_block.h"

#include <array>

#include "engine/models/affine.h"
#include "engine/models/model_tensors.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace {

using Affine = arch::Affine<NodeId>;

std::array<NodeId, 3> project_qkv(Graph& g, const Affine& qkv, NodeId h, int64_t d, FusedSplit split) {
    std::array<NodeId, 3> out{};
    if (split == FusedSplit::OutputColumns) {
        const NodeId y = linear(g, qkv, h);
        for (int part = 0; part < 3; ++part) out[part] = ops::slice_columns(g, y, part * d, d);
        return out;
    }
    // The fused matrix is three matrices of d rows each, one after the other.
    for (int part = 0; part < 3; ++part) {
        const NodeId y = ops::matmul(g, model_tensors::leaf_rows(g, qkv.weight, part * d, d), h);
        out[part] = qkv.bias == kNoNode ? y : ops::add(g, y, model_tensors::leaf_rows(g, qkv.bias, part * d, d));
    }
    return out;
}

}  // namespace

NodeId gpt2_forward(Graph& g, const arch::Gpt2Params& p, const arch::Gpt2Tensors<NodeId>& w, const BlockContext& ctx,
                    FusedSplit split) {
    const HeadLayout heads{p.n_heads, p.n_heads, p.head_dim()};
    const auto n_layers = static_cast<int64_t>(w.layers.size());
    NodeId x = ctx.stage.hidden;
    if (x == kNoNode) {
        x = ops::add(g, ops::get_rows(g, w.token_embd, ctx.tokens), ops::get_rows(g, w.position_embd, ctx.positions));
        x = ctx.dropout.apply(g, x);
    }
    for (auto i = static_cast<size_t>(ctx.stage.begin()); i < static_cast<size_t>(ctx.stage.end(n_layers)); ++i) {
        const arch::Gpt2LayerTensors<NodeId>& L = w.layers[i];
        const NodeId h = layer_norm(g, L.attn_norm, x, p.norm_eps);
        const auto [q, k, v] = project_qkv(g, L.attn_qkv, h, p.dim, split);
        const NodeId a = ctx.attention->attend(g, static_cast<int64_t>(i), q, k, v, heads);
        x = ops::add(g, x, ctx.dropout.apply(g, linear(g, L.attn_output, a)));
        const NodeId up = ops::gelu(g, linear(g, L.ffn_up, layer_norm(g, L.ffn_norm, x, p.norm_eps)));
        x = ops::add(g, x, ctx.dropout.apply(g, linear(g, L.ffn_down, up)));
    }
    if (!ctx.stage.ends_model(n_layers)) return x;  // the next stage's input
    if (ctx.last_only && ctx.n > 1) x = ops::slice_rows(g, x, ctx.n - 1, 1);
    x = layer_norm(g, w.output_norm, x, p.norm_eps);
    return ops::matmul(g, w.output != kNoNode ? w.output : w.token_embd, x);
}

}  // namespace kiln
