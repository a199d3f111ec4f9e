#include "engine/models/transformer_block.h"

#include <cmath>

#include "engine/models/affine.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace {

using arch::TransformerParams;
using Affine = arch::Affine<NodeId>;

struct Stack {
    Graph& g;
    const TransformerParams& p;
    const Dropout& dropout;

    NodeId drop(NodeId x) const { return dropout.apply(g, x); }

    // Embedding * sqrt(d) + sinusoidal positions.
    NodeId embed(NodeId table, const StackInputs& in) const {
        const NodeId e = ops::scale(g, ops::get_rows(g, table, in.tokens), std::sqrt(static_cast<float>(p.dim)));
        return drop(ops::add(g, e, in.positions(g)));
    }
    // A residual sublayer: pre-LN x + f(LN(x)), or post-LN LN(x + f(x)).
    template <typename F>
    NodeId sublayer(const Affine& norm, NodeId x, F f) const {
        if (p.norm_first) return ops::add(g, x, drop(f(layer_norm(g, norm, x, p.norm_eps))));
        return layer_norm(g, norm, ops::add(g, x, drop(f(x))), p.norm_eps);
    }
    NodeId feed_forward(const Affine& up, const Affine& down, NodeId x) const {
        const NodeId h = linear(g, up, x);
        const bool relu = p.activation == TransformerParams::Activation::Relu;
        return linear(g, down, drop(relu ? ops::relu(g, h) : ops::gelu_erf(g, h)));
    }
    NodeId self_attention(const arch::AttentionTensors<NodeId>& w, NodeId h, KeyValueReader& attention,
                          int64_t layer) const {
        const NodeId q = linear(g, w.q, h);
        const NodeId k = linear(g, w.k, h);
        const NodeId v = linear(g, w.v, h);
        return linear(g, w.o, attention.attend(g, layer, q, k, v, heads()));
    }
    HeadLayout heads() const { return {p.n_heads, p.n_heads, p.head_dim()}; }
};

}  // namespace

NodeId transformer_encode(Graph& g, const TransformerParams& p, const arch::TransformerTensors<NodeId>& w,
                          const StackInputs& in, const Dropout& dropout) {
    const Stack s{g, p, dropout};
    NodeId x = s.embed(w.token_embd, in);
    for (size_t i = 0; i < w.encoder.size(); ++i) {
        const arch::EncoderLayerTensors<NodeId>& L = w.encoder[i];
        const auto layer = static_cast<int64_t>(i);
        x = s.sublayer(L.attn_norm, x, [&](NodeId h) { return s.self_attention(L.attn, h, *in.self_attention, layer); });
        x = s.sublayer(L.ffn_norm, x, [&](NodeId h) { return s.feed_forward(L.ffn_up, L.ffn_down, h); });
    }
    if (w.enc_output_norm.weight != kNoNode) x = layer_norm(g, w.enc_output_norm, x, p.norm_eps);
    return x;
}

NodeId transformer_decode(Graph& g, const TransformerParams& p, const arch::TransformerTensors<NodeId>& w,
                          const StackInputs& in, CrossKeyValueReader& cross, const Dropout& dropout) {
    const Stack s{g, p, dropout};
    const NodeId table = w.dec_token_embd != kNoNode ? w.dec_token_embd : w.token_embd;
    NodeId y = s.embed(table, in);
    for (size_t i = 0; i < w.decoder.size(); ++i) {
        const arch::DecoderLayerTensors<NodeId>& L = w.decoder[i];
        const auto layer = static_cast<int64_t>(i);
        y = s.sublayer(L.attn_norm, y, [&](NodeId h) { return s.self_attention(L.attn, h, *in.self_attention, layer); });
        y = s.sublayer(L.cross_attn_norm, y, [&](NodeId h) {
            const NodeId q = linear(g, L.cross_attn.q, h);
            return linear(g, L.cross_attn.o, cross.attend(g, layer, q, L.cross_attn, s.heads()));
        });
        y = s.sublayer(L.ffn_norm, y, [&](NodeId h) { return s.feed_forward(L.ffn_up, L.ffn_down, h); });
    }
    if (w.dec_output_norm.weight != kNoNode) y = layer_norm(g, w.dec_output_norm, y, p.norm_eps);
    // The head: output.weight, else tied to the decoder's embedding.
    const Affine head{w.output.weight != kNoNode ? w.output.weight : table, w.output.bias};
    return linear(g, head, y);
}

NodeId BatchCrossKeyValues::attend(Graph& g, int64_t, NodeId q, const arch::AttentionTensors<NodeId>& w,
                                   const HeadLayout& heads) {
    const NodeId k = linear(g, w.k, memory_);
    const NodeId v = linear(g, w.v, memory_);
    return ops::sequence_attention(g, q, k, v, mask_, heads.n_heads, heads.n_kv_heads, heads.head_dim, batch_, false,
                                   dropout_, seed_);
}

}  // namespace kiln
