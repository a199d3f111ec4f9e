// The minicpm architecture as a decoder: llama's tensors checked against the
// file and llama's block builder with MiniCPM's three scalings.
#include <memory>

#include "engine/models/decoder.h"
#include "engine/models/llama_block.h"
#include "engine/models/model_tensors.h"
#include "formats/arch/minicpm_arch.h"

namespace kiln {

namespace {

class MiniCpmDecoder final : public DecoderArch {
public:
    explicit MiniCpmDecoder(arch::MiniCpmParams p)
        : DecoderArch(std::string(arch::kMiniCpm),
                      {p.llama.n_vocab, p.llama.n_layers, p.llama.kv_dim(), p.llama.n_ctx_train, false,
                       p.llama.head_dim()},
                      p.llama.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return llama_forward(g, params_.llama, arch::llama_tensors<NodeId>(params_.llama, leaf), ctx,
                             {params_.embedding_scale, params_.residual_scale, params_.logit_scale});
    }
    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::llama_tensor_specs(params_.llama); }

private:
    arch::MiniCpmParams params_;
};

}  // namespace

std::unique_ptr<DecoderArch> load_minicpm_decoder(const GgufFile& f) {
    arch::MiniCpmParams p = arch::MiniCpmParams::read(f);
    const auto t = arch::llama_tensors<const GgufTensor*>(p.llama, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    if (t.output == nullptr) model_tensors::find_tied_head(f, p.llama.dim, p.llama.n_vocab, t.token_embd->name);
    if (t.rope_freqs != nullptr) model_tensors::check_rope_factors(f, *t.rope_freqs);
    return std::make_unique<MiniCpmDecoder>(std::move(p));
}

}  // namespace kiln
