#include "engine/train/llama_train_model.h"

#include <cmath>
#include <set>

#include "engine/core/error.h"
#include "engine/models/llama_block.h"

namespace kiln::train {

LlamaTrainModel::LlamaTrainModel(arch::LlamaParams params, bool tied, bool decay_embeddings)
    : params_(std::move(params)), tied_(tied) {
    if (params_.n_vocab < 1) fail("llama", "the vocabulary is empty");
    for (int64_t v : {params_.n_ctx_train, params_.dim, params_.n_layers, params_.n_heads, params_.n_kv_heads,
                      params_.ffn_dim, params_.n_rot})
        if (v < 1) fail("llama", "sizes must be positive");
    params_.validate("llama");
    for (const arch::TensorSpec& s : arch::llama_tensor_specs(params_)) {
        // Optional tensors are not trained: biases, rope factors, and output.weight when the head is the token embedding.
        if (s.optional && (tied_ || s.role != arch::TensorRole::Matrix)) continue;
        add(s.name, s.dims,
            s.role == arch::TensorRole::Matrix || (s.role == arch::TensorRole::Table && decay_embeddings));
    }
    allocate();
}

void LlamaTrainModel::initialize(Rng& rng) {
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(params_.n_layers));
    std::set<std::string> residual, norms;
    for (const arch::LlamaLayerTensors<std::string>& l : arch::llama_tensor_names(params_).layers) {
        residual.insert({l.attn_output, l.ffn_down});
        norms.insert({l.attn_norm, l.ffn_norm});
    }
    norms.insert(arch::llama_tensor_names(params_).output_norm);
    for (const ParamTensor& t : tensors()) {
        float* p = data().data() + t.segment.offset;
        const double std = residual.contains(t.name) ? residual_std : 0.02;
        for (size_t i = 0; i < t.segment.count; ++i)
            p[i] = norms.contains(t.name) ? 1.0f : static_cast<float>(rng.normal() * std);
    }
}

std::unique_ptr<CausalTrainGraph> build_llama_train_graph(LlamaTrainModel& model, int64_t batch, int64_t context,
                                                          bool training, float dropout) {
    const arch::LlamaParams& p = model.params();
    if (batch < 1) fail("llama", "batch {} must be positive", batch);
    if (context < 1 || context > p.n_ctx_train) fail("llama", "context {} is outside 1..{}", context, p.n_ctx_train);
    return build_causal_train_graph(model, batch, context, training, dropout,
                                    [&](Graph& g, const std::vector<NodeId>& params, const BlockContext& ctx) {
                                        const auto w = arch::llama_tensors<NodeId>(p, [&](const arch::TensorSpec& s) {
                                            return model.node_of(params, s.name);
                                        });
                                        return llama_forward(g, p, w, ctx);
                                    });
}

}  // namespace kiln::train
