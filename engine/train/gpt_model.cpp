#include "engine/train/gpt_model.h"

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "engine/train/autodiff.h"

namespace kiln::train {

namespace {

std::string block(int64_t layer, const char* rest) { return "blk." + std::to_string(layer) + "." + rest; }

}  // namespace

void GptConfig::validate() const {
    if (vocab < 1) fail("gpt", "the vocabulary is empty");
    if (context < 1 || width < 1 || layers < 1 || heads < 1 || ffn < 1)
        fail("gpt", "sizes must be positive (context {}, width {}, layers {}, heads {}, ffn {})", context, width, layers,
             heads, ffn);
    if (width % heads != 0) fail("gpt", "width {} is not divisible by {} heads", width, heads);
    if (!(eps > 0.0f)) fail("gpt", "layer norm epsilon {} must be positive", eps);
}

GptModel::GptModel(GptConfig config, bool decay_embeddings) : config_(config) {
    config_.validate();
    const auto d = static_cast<uint64_t>(config_.width), f = static_cast<uint64_t>(config_.ffn);
    const auto v = static_cast<uint64_t>(config_.vocab), n = static_cast<uint64_t>(config_.context);
    add("token_embd.weight", {d, v}, decay_embeddings);
    add("position_embd.weight", {d, n}, decay_embeddings);
    for (int64_t l = 0; l < config_.layers; ++l) {
        add(block(l, "attn_norm.weight"), {d}, false);
        add(block(l, "attn_norm.bias"), {d}, false);
        add(block(l, "attn_qkv.weight"), {d, 3 * d}, true);
        if (config_.bias) add(block(l, "attn_qkv.bias"), {3 * d}, false);
        add(block(l, "attn_output.weight"), {d, d}, true);
        if (config_.bias) add(block(l, "attn_output.bias"), {d}, false);
        add(block(l, "ffn_norm.weight"), {d}, false);
        add(block(l, "ffn_norm.bias"), {d}, false);
        add(block(l, "ffn_up.weight"), {d, f}, true);
        if (config_.bias) add(block(l, "ffn_up.bias"), {f}, false);
        add(block(l, "ffn_down.weight"), {f, d}, true);
        if (config_.bias) add(block(l, "ffn_down.bias"), {d}, false);
    }
    add("output_norm.weight", {d}, false);
    add("output_norm.bias", {d}, false);
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

void GptGraph::set_dropout_seed(uint64_t seed) {
    if (dropout_seed == kNoNode) return;
    int32_t* s = graph.node(dropout_seed).row<int32_t>(0);
    s[0] = static_cast<int32_t>(static_cast<uint32_t>(seed));
    s[1] = static_cast<int32_t>(static_cast<uint32_t>(seed >> 32));
}

std::unique_ptr<GptGraph> build_gpt_graph(GptModel& model, int64_t batch, int64_t context, bool training,
                                          float dropout) {
    const GptConfig& c = model.config();
    if (batch < 1) fail("gpt", "batch {} must be positive", batch);
    if (context < 1 || context > c.context) fail("gpt", "context {} is outside 1..{}", context, c.context);
    auto out = std::make_unique<GptGraph>();
    out->batch = batch;
    out->context = context;
    Graph& g = out->graph;
    out->params = model.add_states(g);
    const auto param = [&](const std::string& name) { return model.node_of(out->params, name); };
    const int64_t rows = batch * context, d = c.width;
    out->tokens = g.input("tokens", DType::I32, Shape::of({rows}));
    out->positions = g.input("positions", DType::I32, Shape::of({rows}));
    out->targets = g.input("targets", DType::I32, Shape::of({rows}));
    int32_t* pos = g.node(out->positions).row<int32_t>(0);
    for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(r % context);
    const bool use_dropout = training && dropout > 0.0f;
    if (use_dropout) out->dropout_seed = g.input("dropout_seed", DType::I32, Shape::of({2}));
    const auto drop = [&](NodeId x) { return use_dropout ? ops::dropout(g, x, out->dropout_seed, dropout) : x; };
    // y = W x (+ b)
    const auto linear = [&](NodeId x, int64_t layer, const char* weight, const char* bias) {
        const NodeId y = ops::matmul(g, param(block(layer, weight)), x);
        const NodeId b = param(block(layer, bias));
        return b == kNoNode ? y : ops::add(g, y, b);
    };

    NodeId x = ops::add(g, ops::get_rows(g, param("token_embd.weight"), out->tokens),
                        ops::get_rows(g, param("position_embd.weight"), out->positions));
    x = drop(x);
    for (int64_t l = 0; l < c.layers; ++l) {
        NodeId h = ops::layer_norm(g, x, param(block(l, "attn_norm.weight")), param(block(l, "attn_norm.bias")), c.eps);
        const NodeId qkv = linear(h, l, "attn_qkv.weight", "attn_qkv.bias");
        const NodeId q = ops::slice_columns(g, qkv, 0, d);
        const NodeId k = ops::slice_columns(g, qkv, d, d);
        const NodeId v = ops::slice_columns(g, qkv, 2 * d, d);
        const NodeId a = ops::batch_attention(g, q, k, v, kNoNode, c.heads, d / c.heads, batch, true,
                                              use_dropout ? dropout : 0.0f, out->dropout_seed);
        x = ops::add(g, x, drop(linear(a, l, "attn_output.weight", "attn_output.bias")));
        h = ops::layer_norm(g, x, param(block(l, "ffn_norm.weight")), param(block(l, "ffn_norm.bias")), c.eps);
        const NodeId up = ops::gelu(g, linear(h, l, "ffn_up.weight", "ffn_up.bias"));
        x = ops::add(g, x, drop(linear(up, l, "ffn_down.weight", "ffn_down.bias")));
    }
    x = ops::layer_norm(g, x, param("output_norm.weight"), param("output_norm.bias"), c.eps);
    out->logits = ops::matmul(g, param("token_embd.weight"), x);  // tied head
    out->loss = ops::cross_entropy(g, out->logits, out->targets, -1);
    if (training) {
        out->grads = append_loss_backward(g, out->loss, out->params).params;
    } else {
        g.mark_output(out->loss);
        g.mark_output(out->logits);
    }
    g.plan();
    return out;
}

}  // namespace kiln::train
