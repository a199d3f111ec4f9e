#include "engine/models/gpt2.h"

#include "engine/core/error.h"
#include "engine/models/gpt2_block.h"
#include "engine/models/model_tensors.h"

namespace kiln {

namespace {

class Gpt2Decoder final : public DecoderArch {
public:
    explicit Gpt2Decoder(arch::Gpt2Params p)
        : DecoderArch(std::string(arch::kGpt2), {p.n_vocab, p.n_layers, p.dim, p.n_ctx_train, true, p.head_dim()}, p.dim),
          params_(std::move(p)) {}

    bool builds_stages() const noexcept override { return true; }

    NodeId forward(Graph& g, const BlockContext& ctx, const WeightLeaves& weights) const override {
        const auto leaf = [&](const arch::TensorSpec& s) { return weights(g, s); };
        return gpt2_forward(g, params_, arch::gpt2_tensors<NodeId>(params_, leaf), ctx, FusedSplit::WeightRows);
    }

    std::vector<arch::TensorSpec> tensor_specs() const override { return arch::gpt2_tensor_specs(params_); }

    const arch::Gpt2Params& params() const noexcept { return params_; }

private:
    arch::Gpt2Params params_;
};

}  // namespace

std::unique_ptr<DecoderArch> load_gpt2_decoder(const GgufFile& f) {
    arch::Gpt2Params p = arch::Gpt2Params::read(f);
    const auto t = arch::gpt2_tensors<const GgufTensor*>(p, [&](const arch::TensorSpec& s) { return model_tensors::find(f, s); });
    if (t.output == nullptr) model_tensors::find_tied_head(f, p.dim, p.n_vocab, t.token_embd->name);
    return std::make_unique<Gpt2Decoder>(std::move(p));
}

const arch::Gpt2Params& gpt2_params(const DecoderArch& decoder) {
    const auto* gpt2 = dynamic_cast<const Gpt2Decoder*>(&decoder);
    if (gpt2 == nullptr) fail("model", "architecture '{}' is not gpt2", decoder.name());
    return gpt2->params();
}

}  // namespace kiln
