#include "engine/train/seq2seq_model.h"

#include <cmath>
#include <string>

#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "engine/train/autodiff.h"

namespace kiln::train {

namespace {

std::string layer(const char* stack, int64_t n, const char* rest) {
    return std::string(stack) + ".blk." + std::to_string(n) + "." + rest;
}

}  // namespace

void Seq2SeqConfig::validate() const {
    if (vocab < 1) fail("transformer", "the vocabulary is empty");
    if (context < 1 || width < 1 || encoder_layers < 1 || decoder_layers < 1 || heads < 1 || ffn < 1)
        fail("transformer", "sizes must be positive");
    if (width % heads != 0) fail("transformer", "width {} is not divisible by {} heads", width, heads);
    if (width % 2 != 0) fail("transformer", "width {} must be even (sinusoidal positions)", width);
}

Seq2SeqModel::Seq2SeqModel(Seq2SeqConfig config) : config_(config) {
    config_.validate();
    const auto d = static_cast<uint64_t>(config_.width), f = static_cast<uint64_t>(config_.ffn);
    add("token_embd.weight", {d, static_cast<uint64_t>(config_.vocab)}, false);
    const auto attention = [&](const std::string& prefix) {
        for (const char* p : {"q", "k", "v", "o"}) {
            add(prefix + p + ".weight", {d, d}, true);
            add(prefix + p + ".bias", {d}, false);
        }
    };
    const auto norm = [&](const std::string& name) {
        add(name + ".weight", {d}, false);
        add(name + ".bias", {d}, false);
    };
    const auto ffn = [&](const char* stack, int64_t n) {
        add(layer(stack, n, "ffn_up.weight"), {d, f}, true);
        add(layer(stack, n, "ffn_up.bias"), {f}, false);
        add(layer(stack, n, "ffn_down.weight"), {f, d}, true);
        add(layer(stack, n, "ffn_down.bias"), {d}, false);
        norm(layer(stack, n, "ffn_norm"));
    };
    for (int64_t n = 0; n < config_.encoder_layers; ++n) {
        attention(layer("enc", n, "attn_"));
        norm(layer("enc", n, "attn_norm"));
        ffn("enc", n);
    }
    norm("enc.output_norm");
    for (int64_t n = 0; n < config_.decoder_layers; ++n) {
        attention(layer("dec", n, "attn_"));
        norm(layer("dec", n, "attn_norm"));
        attention(layer("dec", n, "cross_attn_"));
        norm(layer("dec", n, "cross_attn_norm"));
        ffn("dec", n);
    }
    norm("dec.output_norm");
    allocate();
}

void Seq2SeqModel::initialize(Rng& rng) {
    for (const ParamTensor& t : tensors()) {
        float* p = data().data() + t.segment.offset;
        const bool embedding = t.name == "token_embd.weight";
        const bool norm_weight = t.name.ends_with("norm.weight");
        const double limit = t.is_matrix() ? std::sqrt(6.0 / static_cast<double>(t.dims[0] + t.dims[1])) : 0.0;
        for (size_t i = 0; i < t.segment.count; ++i) {
            if (embedding) p[i] = static_cast<float>(rng.normal() / std::sqrt(static_cast<double>(config_.width)));
            else if (t.is_matrix()) p[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
            else p[i] = norm_weight ? 1.0f : 0.0f;
        }
    }
}

void Seq2SeqGraph::set_dropout_seed(uint64_t seed) {
    if (dropout_seed == kNoNode) return;
    int32_t* s = graph.node(dropout_seed).row<int32_t>(0);
    s[0] = static_cast<int32_t>(static_cast<uint32_t>(seed));
    s[1] = static_cast<int32_t>(static_cast<uint32_t>(seed >> 32));
}

std::unique_ptr<Seq2SeqGraph> build_seq2seq_graph(Seq2SeqModel& model, int64_t batch, int64_t src_len, int64_t tgt_len,
                                                  bool training, float dropout) {
    const Seq2SeqConfig& c = model.config();
    if (batch < 1 || src_len < 1 || tgt_len < 1 || src_len > c.context || tgt_len > c.context)
        fail("transformer", "batch {} of {} source and {} target tokens does not fit context {}", batch, src_len, tgt_len,
             c.context);
    auto out = std::make_unique<Seq2SeqGraph>();
    out->batch = batch;
    out->src_len = src_len;
    out->tgt_len = tgt_len;
    Graph& g = out->graph;
    out->params = model.add_states(g);
    const auto P = [&](const std::string& name) { return model.node_of(out->params, name); };
    const int64_t d = c.width, heads = c.heads, head_dim = d / heads;
    out->source = g.input("source", DType::I32, Shape::of({batch * src_len}));
    out->source_mask = g.input("source_mask", DType::I8, Shape::of({src_len, batch}));
    out->decoder_input = g.input("decoder_input", DType::I32, Shape::of({batch * tgt_len}));
    out->labels = g.input("labels", DType::I32, Shape::of({batch * tgt_len}));
    if (!(dropout >= 0.0f && dropout < 1.0f)) fail("transformer", "dropout {} is outside [0, 1)", dropout);
    const float p = training ? dropout : 0.0f;
    if (p > 0.0f) out->dropout_seed = g.input("dropout_seed", DType::I32, Shape::of({2}));
    const auto drop = [&](NodeId x) { return p > 0.0f ? ops::dropout(g, x, out->dropout_seed, p) : x; };

    // Sinusoidal positions of every row, a constant input.
    const auto positions = [&](const char* name, int64_t len) {
        const NodeId pe = g.input(name, DType::F32, Shape::of({d, batch * len}));
        for (int64_t r = 0; r < batch * len; ++r) {
            const double pos = static_cast<double>(r % len);
            float* row = g.node(pe).row(r);
            for (int64_t i = 0; i < d / 2; ++i) {
                const double angle = pos / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(d));
                row[2 * i] = static_cast<float>(std::sin(angle));
                row[2 * i + 1] = static_cast<float>(std::cos(angle));
            }
        }
        return pe;
    };
    const NodeId embedding = P("token_embd.weight");
    const auto embed = [&](NodeId ids, const char* pe_name, int64_t len) {
        return drop(ops::add(g, ops::scale(g, ops::get_rows(g, embedding, ids), std::sqrt(static_cast<float>(d))),
                             positions(pe_name, len)));
    };
    const auto linear = [&](NodeId x, const std::string& name) {
        return ops::add(g, ops::matmul(g, P(name + ".weight"), x), P(name + ".bias"));
    };
    const auto norm = [&](NodeId x, const std::string& name) {
        return ops::layer_norm(g, x, P(name + ".weight"), P(name + ".bias"), c.eps);
    };
    const auto attend = [&](NodeId queries, NodeId memory, const std::string& prefix, NodeId mask, bool causal) {
        const NodeId q = linear(queries, prefix + "q");
        const NodeId k = linear(memory, prefix + "k");
        const NodeId v = linear(memory, prefix + "v");
        return linear(ops::batch_attention(g, q, k, v, mask, heads, head_dim, batch, causal, p, out->dropout_seed),
                      prefix + "o");
    };
    const auto feed_forward = [&](NodeId x, const char* stack, int64_t n) {
        const NodeId up = linear(x, layer(stack, n, "ffn_up"));
        return linear(drop(c.gelu ? ops::gelu_erf(g, up) : ops::relu(g, up)), layer(stack, n, "ffn_down"));
    };
    // Pre-LN: x + f(LN(x)); post-LN: LN(x + f(x)).
    const auto sublayer = [&](NodeId x, const std::string& norm_name, auto f) {
        if (c.norm_first) return ops::add(g, x, drop(f(norm(x, norm_name))));
        return norm(ops::add(g, x, drop(f(x))), norm_name);
    };

    NodeId x = embed(out->source, "source_positions", src_len);
    for (int64_t n = 0; n < c.encoder_layers; ++n) {
        x = sublayer(x, layer("enc", n, "attn_norm"),
                     [&](NodeId h) { return attend(h, h, layer("enc", n, "attn_"), out->source_mask, false); });
        x = sublayer(x, layer("enc", n, "ffn_norm"), [&](NodeId h) { return feed_forward(h, "enc", n); });
    }
    const NodeId memory = norm(x, "enc.output_norm");
    NodeId y = embed(out->decoder_input, "target_positions", tgt_len);
    for (int64_t n = 0; n < c.decoder_layers; ++n) {
        y = sublayer(y, layer("dec", n, "attn_norm"),
                     [&](NodeId h) { return attend(h, h, layer("dec", n, "attn_"), kNoNode, true); });
        y = sublayer(y, layer("dec", n, "cross_attn_norm"), [&](NodeId h) {
            return attend(h, memory, layer("dec", n, "cross_attn_"), out->source_mask, false);
        });
        y = sublayer(y, layer("dec", n, "ffn_norm"), [&](NodeId h) { return feed_forward(h, "dec", n); });
    }
    y = norm(y, "dec.output_norm");
    out->logits = ops::matmul(g, embedding, y);  // tied to the (shared) embedding
    out->loss = ops::cross_entropy(g, out->logits, out->labels, -1);
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
