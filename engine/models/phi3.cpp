// The phi3 architecture as a decoder (llama.cpp's build_phi3; Hugging Face's
// Phi3ForCausalLM): llama's block with fused projections, NEOX rope with
// LongRoPE factors, a sliding window on every layer.
#include <memory>

#include "engine/core/error.h"
#include "engine/models/decoder.h"
#include "engine/models/llama_block.h"
#include "engine/models/model_tensors.h"
#include "engine/ops/ops.h"
#include "formats/arch/phi3_arch.h"

namespace kiln {

namespace {

NodeId phi3_forward(Graph& g, const arch::Phi3Params& p, const arch::Phi3Tensors<NodeId>& w, const BlockContext& ctx) {
    const arch::LlamaParams& l = p.llama;
    const kernels::RopeSpec q_rope = llama_rope_spec(l, l.n_heads, kernels::RopeStyle::Neox);
    const kernels::RopeSpec k_rope = llama_rope_spec(l, l.n_kv_heads, kernels::RopeStyle::Neox);
    // LongRoPE: the long factors once the context passes the trained one (llama.cpp's
    // choice by the context per sequence; a training batch counts its own length).
    const int64_t context = ctx.n_ctx != 0 ? ctx.n_ctx : ctx.n;
    const NodeId factors = context > l.rope_scaling.original_context ? w.rope_factors_long : w.rope_factors_short;
    const HeadLayout heads{l.n_heads, l.n_kv_heads, l.head_dim(), 0.0f, 0.0f, p.sliding_window};
    const int64_t d = l.dim, kv = l.kv_dim(), ffn = l.ffn_dim;
    const auto n_layers = static_cast<int64_t>(w.layers.size());
    NodeId x = ctx.stage.hidden != kNoNode ? ctx.stage.hidden : ctx.dropout.apply(g, ops::get_rows(g, w.token_embd, ctx.tokens));
    for (auto i = static_cast<size_t>(ctx.stage.begin()); i < static_cast<size_t>(ctx.stage.end(n_layers)); ++i) {
        const arch::Phi3LayerTensors<NodeId>& L = w.layers[i];
        NodeId h = ops::rms_norm(g, x, L.attn_norm, l.norm_eps);
        // One product with the fused matrix, then its q, k and v parts.
        const NodeId qkv = ops::matmul(g, L.attn_qkv, h);
        const NodeId q = ops::rope(g, ops::slice_columns(g, qkv, 0, d), ctx.positions, q_rope, factors);
        const NodeId k = ops::rope(g, ops::slice_columns(g, qkv, d, kv), ctx.positions, k_rope, factors);
        const NodeId v = ops::slice_columns(g, qkv, d + kv, kv);
        const NodeId a = ctx.attention->attend(g, static_cast<int64_t>(i), q, k, v, heads);
        x = ops::add(g, x, ctx.dropout.apply(g, ops::matmul(g, L.attn_output, a)));
        h = ops::rms_norm(g, x, L.ffn_norm, l.norm_eps);
        const NodeId gate_up = ops::matmul(g, L.ffn_up, h);
        const NodeId gated = ops::swiglu(g, ops::slice_columns(g, gate_up, 0, ffn), ops::slice_columns(g, gate_up, ffn, ffn));
        x = ops::add(g, x, ctx.dropout.apply(g, ops::matmul(g, L.ffn_down, gated)));
    }
    if (!ctx.stage.ends_model(n_layers)) return x;  // the next stage's input
    if (ctx.last_only && ctx.n > 1) x = ops::slice_rows(g, x, ctx.n - 1, 1);
    return ops::matmul(g, w.output, ops::rms_norm(g, x, w.output_norm, l.norm_eps));
}

class Phi3Decoder final : public DecoderArch {
public:
    explicit Phi3Decoder(arch::Phi3Params p)
        : DecoderArch(std::string(arch::kPhi3),
                      {p.llama.n_vocab, p.llama.n_layers, p.llama.kv_dim(), p.llama.n_ctx_train, false,
                       p.llama.head_dim()},
                      p.llama.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return phi3_forward(g, params_, arch::phi3_tensors<NodeId>(params_, leaf), ctx);
    }
    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::phi3_tensor_specs(params_); }

private:
    arch::Phi3Params params_;
};

}  // namespace

std::unique_ptr<DecoderArch> load_phi3_decoder(const GgufFile& f) {
    arch::Phi3Params p = arch::Phi3Params::read(f);
    const auto t = arch::phi3_tensors<const GgufTensor*>(p, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    if ((t.rope_factors_long == nullptr) != (t.rope_factors_short == nullptr))
        fail("model", "{}: tensor '{}' without '{}' (LongRoPE needs both)", f.name(),
             t.rope_factors_long != nullptr ? t.rope_factors_long->name : t.rope_factors_short->name,
             t.rope_factors_long != nullptr ? "rope_factors_short.weight" : "rope_factors_long.weight");
    for (const GgufTensor* factors : {t.rope_factors_long, t.rope_factors_short})
        if (factors != nullptr) model_tensors::check_rope_factors(f, *factors);
    return std::make_unique<Phi3Decoder>(std::move(p));
}

}  // namespace kiln
