#include "engine/train/gpt_model.h"

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/models/gpt2_block.h"
#include "engine/ops/ops.h"

namespace kiln::train {

void GptConfig::validate() const {
    if (vocab < 1) fail("gpt", "the vocabulary is empty");
    if (context < 1 || width < 1 || layers < 1 || heads < 1 || ffn < 1)
        fail("gpt", "sizes must be positive (context {}, width {}, layers {}, heads {}, ffn {})", context, width, layers,
             heads, ffn);
    if (width % heads != 0) fail("gpt", "width {} is not divisible by {} heads", width, heads);
    if (!(eps > 0.0f)) fail("gpt", "layer norm epsilon {} must be positive", eps);
}

GptConfig GptConfig::of(const arch::Gpt2Params& p, bool bias) {
    GptConfig c;
    c.vocab = p.n_vocab;
    c.context = p.n_ctx_train;
    c.width = p.dim;
    c.layers = p.n_layers;
    c.heads = p.n_heads;
    c.ffn = p.ffn_dim;
    c.bias = bias;
    c.eps = p.norm_eps;
    return c;
}

arch::Gpt2Params GptModel::params() const {
    arch::Gpt2Params p;
    p.name = "kiln-train char GPT";
    p.n_vocab = config_.vocab;
    p.n_ctx_train = config_.context;
    p.dim = config_.width;
    p.n_layers = config_.layers;
    p.n_heads = config_.heads;
    p.ffn_dim = config_.ffn;
    p.norm_eps = config_.eps;
    return p;
}

GptModel::GptModel(GptConfig config, bool decay_embeddings) : config_(config) {
    config_.validate();
    using arch::TensorRole;
    arch::gpt2_tensors<int>(params(), [&](const arch::TensorSpec& s) {
        if (s.role == TensorRole::Bias && !config_.bias) return 0;  // nanoGPT's bias=False
        if (s.role == TensorRole::Matrix && s.optional) return 0;   // the head is tied to the token embedding
        const bool decay = s.role == TensorRole::Matrix || (s.role == TensorRole::Table && decay_embeddings);
        add(s.name, s.dims, decay);
        return 0;
    });
    allocate();
}

void GptModel::initialize(Rng& rng) {
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers));
    for (const ParamTensor& t : tensors()) {
        float* p = data().data() + t.segment.offset;
        const bool norm_weight = t.name.ends_with("norm.weight");
        const bool bias = t.name.ends_with(".bias");
        const bool residual = t.name.ends_with("attn_output.weight") || t.name.ends_with("ffn_down.weight");
        for (size_t i = 0; i < t.segment.count; ++i) {
            if (norm_weight) p[i] = 1.0f;
            else if (bias) p[i] = 0.0f;
            else p[i] = static_cast<float>(rng.normal() * (residual ? residual_std : 0.02));
        }
    }
}

std::unique_ptr<GptGraph> build_gpt_graph(GptModel& model, int64_t batch, int64_t context, bool training,
                                          float dropout) {
    const GptConfig& c = model.config();
    if (batch < 1) fail("gpt", "batch {} must be positive", batch);
    if (context < 1 || context > c.context) fail("gpt", "context {} is outside 1..{}", context, c.context);
    const arch::Gpt2Params p = model.params();
    return build_causal_train_graph(model, batch, context, training, dropout,
                                    [&](Graph& g, const std::vector<NodeId>& params, const BlockContext& ctx) {
                                        const auto w = arch::gpt2_tensors<NodeId>(p, [&](const arch::TensorSpec& s) {
                                            return model.node_of(params, s.name);
                                        });
                                        return gpt2_forward(g, p, w, ctx, FusedSplit::OutputColumns);
                                    });
}

}  // namespace kiln::train
