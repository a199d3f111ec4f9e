#include "engine/train/seq2seq_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/error.h"
#include "engine/models/affine.h"
#include "engine/models/transformer_block.h"
#include "engine/ops/ops.h"
#include "engine/train/causal_train_graph.h"

namespace kiln::train {

void Seq2SeqConfig::validate() const {
    if (vocab < 1) fail("transformer", "the vocabulary is empty");
    if (context < 1 || width < 1 || encoder_layers < 1 || decoder_layers < 1 || heads < 1 || ffn < 1)
        fail("transformer", "sizes must be positive");
    if (width % heads != 0) fail("transformer", "width {} is not divisible by {} heads", width, heads);
    if (width % 2 != 0) fail("transformer", "width {} must be even (sinusoidal positions)", width);
}

Seq2SeqConfig Seq2SeqConfig::of(const arch::TransformerParams& p) {
    Seq2SeqConfig c;
    c.vocab = p.n_vocab;
    c.context = p.n_ctx;
    c.width = p.dim;
    c.encoder_layers = p.n_encoder_layers;
    c.decoder_layers = p.n_decoder_layers;
    c.heads = p.n_heads;
    c.ffn = p.ffn_dim;
    c.norm_first = p.norm_first;
    c.gelu = p.activation == arch::TransformerParams::Activation::Gelu;
    c.eps = p.norm_eps;
    return c;
}

arch::TransformerParams Seq2SeqModel::params() const {
    arch::TransformerParams p;
    p.name = "kiln-train encoder-decoder";
    p.n_vocab = config_.vocab;
    p.n_ctx = config_.context;
    p.dim = config_.width;
    p.n_encoder_layers = config_.encoder_layers;
    p.n_decoder_layers = config_.decoder_layers;
    p.n_heads = config_.heads;
    p.ffn_dim = config_.ffn;
    p.norm_eps = config_.eps;
    p.norm_first = config_.norm_first;
    p.activation = config_.gelu ? arch::TransformerParams::Activation::Gelu : arch::TransformerParams::Activation::Relu;
    return p;
}

Seq2SeqModel::Seq2SeqModel(Seq2SeqConfig config) : config_(config) {
    config_.validate();
    const arch::TransformerParams p = params();
    // One embedding, shared by both stacks and the head: no dec.token_embd, output.weight or output.bias.
    const arch::TransformerTensors<std::string> names = arch::transformer_tensor_names(p);
    const std::string* untrained[] = {&names.dec_token_embd, &names.output.weight, &names.output.bias};
    for (const arch::TensorSpec& s : arch::transformer_tensor_specs(p)) {
        if (std::ranges::any_of(untrained, [&](const std::string* name) { return *name == s.name; })) continue;
        add(s.name, s.dims, s.role == arch::TensorRole::Matrix);
    }
    allocate();
}

void Seq2SeqModel::initialize(Rng& rng) {
    const std::string embedding_name = arch::transformer_tensor_names(params()).token_embd;
    for (const ParamTensor& t : tensors()) {
        float* p = data().data() + t.segment.offset;
        const bool embedding = t.name == embedding_name;
        const bool norm_weight = t.name.ends_with("norm.weight");
        const double limit = t.is_matrix() ? std::sqrt(6.0 / static_cast<double>(t.dims[0] + t.dims[1])) : 0.0;
        for (size_t i = 0; i < t.segment.count; ++i) {
            if (embedding) p[i] = static_cast<float>(rng.normal() / std::sqrt(static_cast<double>(config_.width)));
            else if (t.is_matrix()) p[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
            else p[i] = norm_weight ? 1.0f : 0.0f;
        }
    }
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
    const arch::TransformerParams params = model.params();
    const auto w = arch::transformer_tensors<NodeId>(
        params, [&](const arch::TensorSpec& s) { return model.node_of(out->params, s.name); });
    const int64_t d = c.width;
    out->source = g.input("source", DType::I32, Shape::of({batch * src_len}));
    out->source_mask = g.input("source_mask", DType::I8, Shape::of({src_len, batch}));
    out->decoder_input = g.input("decoder_input", DType::I32, Shape::of({batch * tgt_len}));
    out->labels = g.input("labels", DType::I32, Shape::of({batch * tgt_len}));
    if (!(dropout >= 0.0f && dropout < 1.0f)) fail("transformer", "dropout {} is outside [0, 1)", dropout);
    const float p = training ? dropout : 0.0f;
    if (p > 0.0f) out->dropout_seed = g.input("dropout_seed", DType::I32, Shape::of({4}));
    const Dropout drop{out->dropout_seed, p};

    // Sinusoidal positions of every row, a constant input made where the embedding needs it.
    const std::vector<float> table = sinusoidal_positions(d, std::max(src_len, tgt_len));
    const auto positions = [&](const char* name, int64_t len) {
        return [&, name, len](Graph& graph) {
            const NodeId pe = graph.input(name, DType::F32, Shape::of({d, batch * len}));
            for (int64_t r = 0; r < batch * len; ++r)
                std::copy_n(table.data() + (r % len) * d, d, graph.node(pe).row(r));
            return pe;
        };
    };
    BatchKeyValues encoder_attention(batch, p, out->dropout_seed, false, out->source_mask);
    const NodeId memory =
        transformer_encode(g, params, w, StackInputs{out->source, positions("source_positions", src_len), &encoder_attention}, drop);
    BatchKeyValues decoder_attention(batch, p, out->dropout_seed, true);
    BatchCrossKeyValues cross(memory, batch, out->source_mask, p, out->dropout_seed);
    out->logits = transformer_decode(
        g, params, w, StackInputs{out->decoder_input, positions("target_positions", tgt_len), &decoder_attention}, cross, drop);
    out->loss = finish_train_graph(g, out->logits, out->labels, out->params, training, out->grads);
    return out;
}

}  // namespace kiln::train
