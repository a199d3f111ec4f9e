#include "engine/models/llama.h"

#include "engine/core/error.h"
#include "engine/models/llama_block.h"
#include "engine/models/model_tensors.h"

namespace kiln {

namespace {

class LlamaDecoder final : public DecoderArch {
public:
    explicit LlamaDecoder(arch::LlamaParams p)
        : DecoderArch(std::string(arch::kLlama), {p.n_vocab, p.n_layers, p.kv_dim(), p.n_ctx_train, false, p.head_dim()},
                      p.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return llama_forward(g, params_, arch::llama_tensors<NodeId>(params_, leaf), ctx);
    }

    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::llama_tensor_specs(params_); }

    const arch::LlamaParams& params() const noexcept { return params_; }

private:
    arch::LlamaParams params_;
};

}  // namespace

std::unique_ptr<DecoderArch> load_llama_decoder(const GgufFile& f) {
    arch::LlamaParams p = arch::LlamaParams::read(f);
    const auto t = arch::llama_tensors<const GgufTensor*>(p, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    if (t.output == nullptr) model_tensors::find_tied_head(f, p.dim, p.n_vocab, t.token_embd->name);
    if (t.rope_freqs != nullptr) model_tensors::check_rope_factors(f, *t.rope_freqs);
    return std::make_unique<LlamaDecoder>(std::move(p));
}

const arch::LlamaParams& llama_params(const DecoderArch& decoder) {
    const auto* llama = dynamic_cast<const LlamaDecoder*>(&decoder);
    if (llama == nullptr) fail("model", "architecture '{}' is not llama", decoder.name());
    return llama->params();
}

}  // namespace kiln
