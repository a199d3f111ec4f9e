// The qwen2 architecture as a decoder: llama's block with q/k/v biases and
// NEOX rope (llama.cpp's build_qwen2).
#include <memory>

#include "engine/core/error.h"
#include "engine/models/decoder.h"
#include "engine/models/llama_block.h"
#include "engine/models/model_tensors.h"
#include "formats/arch/qwen2_arch.h"

namespace kiln {

namespace {

class Qwen2Decoder final : public DecoderArch {
public:
    explicit Qwen2Decoder(arch::LlamaParams p)
        : DecoderArch(std::string(arch::kQwen2), {p.n_vocab, p.n_layers, p.kv_dim(), p.n_ctx_train, false, p.head_dim()},
                      p.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return llama_forward(g, params_, arch::llama_tensors<NodeId>(params_, leaf), ctx, {}, kernels::RopeStyle::Neox);
    }

    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::llama_tensor_specs(params_); }

private:
    arch::LlamaParams params_;
};

}  // namespace

std::unique_ptr<DecoderArch> load_qwen2_decoder(const GgufFile& f) {
    arch::LlamaParams p = arch::read_qwen2_params(f);
    const auto t = arch::llama_tensors<const GgufTensor*>(p, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    if (t.output == nullptr) model_tensors::find_tied_head(f, p.dim, p.n_vocab, t.token_embd->name);
    // qwen2 has biases on q, k and v only; llama.cpp would not load others.
    for (const auto& b : t.biases)
        for (const GgufTensor* extra : {b.attn_output, b.ffn_gate, b.ffn_down, b.ffn_up})
            if (extra != nullptr)
                fail("model", "{}: tensor '{}' is not part of qwen2 (its only biases are on q, k and v)", f.name(),
                     extra->name);
    if (t.rope_freqs != nullptr)
        fail("model", "{}: tensor '{}' is not part of qwen2", f.name(), t.rope_freqs->name);
    return std::make_unique<Qwen2Decoder>(std::move(p));
}

}  // namespace kiln
