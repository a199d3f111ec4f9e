// The gemma and gemma2 architectures as decoders (llama.cpp's build_gemma and
// build_gemma2; Hugging Face's GemmaForCausalLM and Gemma2ForCausalLM).
#include <cmath>
#include <memory>

#include "engine/models/decoder.h"
#include "engine/models/llama_block.h"
#include "engine/models/model_tensors.h"
#include "engine/ops/ops.h"
#include "formats/arch/gemma_arch.h"

namespace kiln {

namespace {

NodeId gemma_forward(Graph& g, const arch::GemmaParams& p, const arch::GemmaTensors<NodeId>& w,
                     const BlockContext& ctx) {
    const arch::LlamaParams& l = p.llama;
    const kernels::RopeSpec q_rope = llama_rope_spec(l, l.n_heads, kernels::RopeStyle::Neox);
    const kernels::RopeSpec k_rope = llama_rope_spec(l, l.n_kv_heads, kernels::RopeStyle::Neox);
    const auto norm = [&](NodeId x, NodeId weight) { return ops::rms_norm(g, x, weight, l.norm_eps); };
    // Post norms exist in Gemma 2 only.
    const auto post_norm = [&](NodeId x, NodeId weight) { return weight != kNoNode ? norm(x, weight) : x; };
    // The width's square root as the float llama.cpp and Hugging Face multiply with.
    const auto n_layers = static_cast<int64_t>(w.layers.size());
    NodeId x = ctx.stage.hidden;
    if (x == kNoNode) {
        x = ops::scale(g, ops::get_rows(g, w.token_embd, ctx.tokens), std::sqrt(static_cast<float>(l.dim)));
        x = ctx.dropout.apply(g, x);
    }
    for (auto i = static_cast<size_t>(ctx.stage.begin()); i < static_cast<size_t>(ctx.stage.end(n_layers)); ++i) {
        const arch::GemmaLayerTensors<NodeId>& L = w.layers[i];
        const auto layer = static_cast<int64_t>(i);
        const HeadLayout heads{l.n_heads, l.n_kv_heads, l.head_dim(), p.query_scale, p.attn_softcap,
                               p.windowed(layer) ? p.sliding_window : 0};
        NodeId h = norm(x, L.attn_norm);
        const NodeId q = ops::rope(g, ops::matmul(g, L.attn_q, h), ctx.positions, q_rope);
        const NodeId k = ops::rope(g, ops::matmul(g, L.attn_k, h), ctx.positions, k_rope);
        const NodeId v = ops::matmul(g, L.attn_v, h);
        const NodeId a = ctx.attention->attend(g, layer, q, k, v, heads);
        x = ops::add(g, x, ctx.dropout.apply(g, post_norm(ops::matmul(g, L.attn_output, a), L.post_attention_norm)));
        h = norm(x, L.ffn_norm);
        const NodeId gated = ops::mul(g, ops::gelu(g, ops::matmul(g, L.ffn_gate, h)), ops::matmul(g, L.ffn_up, h));
        x = ops::add(g, x, ctx.dropout.apply(g, post_norm(ops::matmul(g, L.ffn_down, gated), L.post_ffw_norm)));
    }
    if (!ctx.stage.ends_model(n_layers)) return x;  // the next stage's input
    if (ctx.last_only && ctx.n > 1) x = ops::slice_rows(g, x, ctx.n - 1, 1);
    const NodeId logits = ops::matmul(g, w.token_embd, norm(x, w.output_norm));
    return p.final_softcap > 0.0f ? ops::softcap(g, logits, p.final_softcap) : logits;
}

class GemmaDecoder final : public DecoderArch {
public:
    explicit GemmaDecoder(arch::GemmaParams p)
        : DecoderArch(std::string(p.gemma2 ? arch::kGemma2 : arch::kGemma),
                      {p.llama.n_vocab, p.llama.n_layers, p.llama.kv_dim(), p.llama.n_ctx_train, false,
                       p.llama.head_dim()},
                      p.llama.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return gemma_forward(g, params_, arch::gemma_tensors<NodeId>(params_, leaf, kNoNode), ctx);
    }
    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::gemma_tensor_specs(params_); }

private:
    arch::GemmaParams params_;
};

std::unique_ptr<DecoderArch> load_gemma_family(const GgufFile& f) {
    arch::GemmaParams p = arch::GemmaParams::read(f);
    const auto t = arch::gemma_tensors<const GgufTensor*>(p, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    model_tensors::find_tied_head(f, p.llama.dim, p.llama.n_vocab, t.token_embd->name);
    return std::make_unique<GemmaDecoder>(std::move(p));
}

}  // namespace

std::unique_ptr<DecoderArch> load_gemma_decoder(const GgufFile& f) { return load_gemma_family(f); }
std::unique_ptr<DecoderArch> load_gemma2_decoder(const GgufFile& f) { return load_gemma_family(f); }

}  // namespace kiln
