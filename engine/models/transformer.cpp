#include "engine/models/transformer.h"

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/models/graph_cache.h"
#include "engine/models/model_tensors.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace mt = model_tensors;

namespace {

int32_t token_id_or(const GgufFile& f, const char* key, int64_t n_vocab) {
    if (!f.find(key)) return -1;
    const int64_t id = f.get_int(key);
    if (id < 0 || id >= n_vocab) fail("model", "{}: {} = {} is outside the vocabulary of {}", f.name(), key, id, n_vocab);
    return static_cast<int32_t>(id);
}

}  // namespace

TransformerModel::TransformerModel(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    const GgufFile& f = *file_;
    const std::string arch = f.get_string("general.architecture");
    if (arch != "transformer") fail("model", "{}: architecture '{}' is not transformer", f.name(), arch);
    TransformerConfig& c = config_;
    c.dim = mt::positive(f, "transformer.embedding_length");
    c.ffn_dim = mt::positive(f, "transformer.feed_forward_length");
    c.n_encoder_layers = mt::positive(f, "transformer.encoder.block_count");
    c.n_decoder_layers = mt::positive(f, "transformer.decoder.block_count");
    c.n_heads = mt::positive(f, "transformer.attention.head_count");
    c.n_ctx = mt::positive(f, "transformer.context_length");
    c.norm_eps = mt::number_or(f, "transformer.attention.layer_norm_epsilon", 1e-5f);
    if (!(c.norm_eps > 0)) fail("model", "{}: transformer.attention.layer_norm_epsilon must be positive", f.name());
    c.norm_first = mt::bool_or(f, "transformer.norm_first", false);
    const std::string act = f.find("transformer.ffn_activation") ? f.get_string("transformer.ffn_activation") : "relu";
    if (act == "relu")
        c.activation = TransformerConfig::Activation::Relu;
    else if (act == "gelu")
        c.activation = TransformerConfig::Activation::Gelu;
    else
        fail("model", "{}: transformer.ffn_activation '{}' is not one of relu, gelu", f.name(), act);
    if (c.dim % c.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
    c.head_dim = c.dim / c.n_heads;

    const GgufTensor* embd = f.find_tensor("token_embd.weight");
    if (embd == nullptr) fail("model", "{}: tensor 'token_embd.weight' is missing", f.name());
    if (embd->dims.size() != 2) fail("model", "{}: tensor 'token_embd.weight' must be 2-D", f.name());
    c.n_vocab = static_cast<int64_t>(embd->dims[1]);
    c.bos = token_id_or(f, "tokenizer.ggml.bos_token_id", c.n_vocab);
    c.eos = token_id_or(f, "tokenizer.ggml.eos_token_id", c.n_vocab);
    c.pad = token_id_or(f, "tokenizer.ggml.padding_token_id", c.n_vocab);
    if (c.bos < 0) fail("model", "{}: tokenizer.ggml.bos_token_id (the decoder's start token) is missing", f.name());
    if (c.eos < 0) fail("model", "{}: tokenizer.ggml.eos_token_id is missing", f.name());

    const auto d = static_cast<uint64_t>(c.dim), ffn = static_cast<uint64_t>(c.ffn_dim),
               vocab = static_cast<uint64_t>(c.n_vocab);
    source_embd_ = mt::find(f, "token_embd.weight", {d, vocab}, mt::Role::Table);
    target_embd_ = mt::find(f, "dec.token_embd.weight", {d, vocab}, mt::Role::Table, false);
    if (target_embd_ == nullptr) target_embd_ = source_embd_;
    output_.weight = mt::find(f, "output.weight", {d, vocab}, mt::Role::Matrix, false);
    if (output_.weight == nullptr) output_.weight = mt::find(f, target_embd_->name, {d, vocab}, mt::Role::Matrix);
    output_.bias = mt::find(f, "output.bias", {vocab}, mt::Role::Norm, false);

    auto affine = [&](const std::string& name, std::vector<uint64_t> dims, bool matrix, bool required = true) {
        const uint64_t out = dims.back();
        return Affine{mt::find(f, name + ".weight", dims, matrix ? mt::Role::Matrix : mt::Role::Norm, required),
                      mt::find(f, name + ".bias", {out}, mt::Role::Norm, false)};
    };
    auto attention = [&](const std::string& p) {
        return Attention{affine(p + "_q", {d, d}, true), affine(p + "_k", {d, d}, true), affine(p + "_v", {d, d}, true),
                         affine(p + "_o", {d, d}, true)};
    };
    for (int64_t i = 0; i < c.n_encoder_layers; ++i) {
        const std::string p = fmt::format("enc.blk.{}.", i);
        encoder_.push_back(EncoderLayer{attention(p + "attn"), affine(p + "attn_norm", {d}, false),
                                        affine(p + "ffn_up", {d, ffn}, true), affine(p + "ffn_down", {ffn, d}, true),
                                        affine(p + "ffn_norm", {d}, false)});
    }
    for (int64_t i = 0; i < c.n_decoder_layers; ++i) {
        const std::string p = fmt::format("dec.blk.{}.", i);
        decoder_.push_back(DecoderLayer{attention(p + "attn"), attention(p + "cross_attn"),
                                        affine(p + "attn_norm", {d}, false), affine(p + "cross_attn_norm", {d}, false),
                                        affine(p + "ffn_up", {d, ffn}, true), affine(p + "ffn_down", {ffn, d}, true),
                                        affine(p + "ffn_norm", {d}, false)});
    }
    encoder_norm_ = affine("enc.output_norm", {d}, false, false);
    decoder_norm_ = affine("dec.output_norm", {d}, false, false);

    // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(the same angle), computed in double.
    positions_.resize(static_cast<size_t>(c.dim * c.n_ctx));
    for (int64_t pos = 0; pos < c.n_ctx; ++pos)
        for (int64_t i = 0; i < c.dim; ++i) {
            const double angle = static_cast<double>(pos) /
                                 std::pow(10000.0, static_cast<double>(i - i % 2) / static_cast<double>(c.dim));
            positions_[static_cast<size_t>(pos * c.dim + i)] =
                static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    info_ = ModelInfo{arch, c.n_vocab, c.n_ctx, mt::parameter_count(f), mt::weight_bytes(f)};
}

namespace {

// The layers' building blocks, shared by the encoder and decoder graphs.
struct Builder {
    Graph& g;
    const TransformerModel& model;
    const TransformerConfig& c = model.config();

    NodeId linear(const TransformerModel::Affine& a, NodeId x) {
        const NodeId y = ops::matmul(g, mt::leaf(g, *a.weight), x);
        return a.bias ? ops::add(g, y, mt::leaf(g, *a.bias)) : y;
    }
    NodeId norm(const TransformerModel::Affine& a, NodeId x) {
        return ops::layer_norm(g, x, mt::leaf(g, *a.weight), a.bias ? mt::leaf(g, *a.bias) : kNoNode, c.norm_eps);
    }
    NodeId ffn(const TransformerModel::Affine& up, const TransformerModel::Affine& down, NodeId x) {
        const NodeId h = linear(up, x);
        const bool relu = c.activation == TransformerConfig::Activation::Relu;
        return linear(down, relu ? ops::relu(g, h) : ops::gelu_erf(g, h));
    }
    // A residual sublayer, post-LN (the paper) or pre-LN.
    template <typename F>
    NodeId residual(const TransformerModel::Affine& norm_weights, NodeId x, F sublayer) {
        if (c.norm_first) return ops::add(g, x, sublayer(norm(norm_weights, x)));
        return norm(norm_weights, ops::add(g, x, sublayer(x)));
    }
    // Embedding * sqrt(d) + sinusoidal positions.
    NodeId embed(const GgufTensor& table, NodeId tokens, NodeId positions) {
        const NodeId e = ops::scale(g, ops::get_rows(g, mt::leaf(g, table), tokens), std::sqrt(static_cast<float>(c.dim)));
        const NodeId pe = g.weight("sinusoidal_positions", DType::F32, Shape::of({c.dim, c.n_ctx}),
                                   model.positions_table().data());
        return ops::add(g, e, ops::get_rows(g, pe, positions));
    }
};

}  // namespace

TransformerSession::TransformerSession(const TransformerModel& model, int64_t n_sources, int64_t max_source,
                                       int64_t n_slots, int64_t max_target, Executor::Mode mode)
    : model_(model),
      mode_(mode),
      n_sources_(n_sources),
      max_source_(max_source),
      targets_(model.config().n_decoder_layers, model.config().dim, n_slots, max_target) {
    const TransformerConfig& c = model.config();
    if (n_sources < 1) fail("model", "a session needs room for at least one source");
    if (max_source < 1 || max_source > c.n_ctx)
        fail("model", "sources of up to {} tokens: outside 1..{}, the positions of this model", max_source, c.n_ctx);
    if (max_target > c.n_ctx)
        fail("model", "targets of up to {} tokens: more than {}, the positions of this model", max_target, c.n_ctx);
    const auto floats = static_cast<size_t>(c.dim * n_sources * max_source);
    cross_k_.assign(static_cast<size_t>(c.n_decoder_layers), std::vector<float>(floats));
    cross_v_.assign(static_cast<size_t>(c.n_decoder_layers), std::vector<float>(floats));
    source_length_.assign(static_cast<size_t>(n_sources), 0);
    source_of_slot_.assign(static_cast<size_t>(n_slots), 0);
}

TransformerSession::EncoderGraph& TransformerSession::encoder_graph(int64_t n_sources, int64_t length) {
    return cached_graph(encoders_, std::pair{n_sources, length}, [&](EncoderGraph& e) {
        Graph& g = e.graph;
        Builder b{g, model_};
        const TransformerConfig& c = model_.config();
        const int64_t n = n_sources * length;
        e.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        e.positions = g.input("positions", DType::I32, Shape::of({n}));
        e.limits = g.input("attention_limits", DType::I32, Shape::of({n}));
        e.mask = g.input("source_mask", DType::I8, Shape::of({n, n}));
        e.cache_rows = g.input("cross_rows", DType::I32, Shape::of({n}));
        NodeId x = b.embed(model_.source_embedding(), e.tokens, e.positions);
        for (const TransformerModel::EncoderLayer& L : model_.encoder_layers()) {
            x = b.residual(L.attn_norm, x, [&](NodeId h) {
                const NodeId a = ops::attention(g, b.linear(L.self.q, h), b.linear(L.self.k, h), b.linear(L.self.v, h),
                                                e.limits, e.mask, c.n_heads, c.n_heads, c.head_dim);
                return b.linear(L.self.o, a);
            });
            x = b.residual(L.ffn_norm, x, [&](NodeId h) { return b.ffn(L.up, L.down, h); });
        }
        if (const auto* norm = model_.encoder_norm()) x = b.norm(*norm, x);
        // Every decoder layer's cross-attention keys and values of the encoder output, computed once.
        const Shape cross_shape = Shape::of({c.dim, n_sources_ * max_source_});
        for (size_t i = 0; i < model_.decoder_layers().size(); ++i) {
            const TransformerModel::DecoderLayer& L = model_.decoder_layers()[i];
            const NodeId k_state = g.state(fmt::format("cross_k.{}", i), DType::F32, cross_shape, cross_k_[i].data());
            const NodeId v_state = g.state(fmt::format("cross_v.{}", i), DType::F32, cross_shape, cross_v_[i].data());
            g.mark_output(ops::store_kv(g, k_state, b.linear(L.cross.k, x), e.cache_rows));
            g.mark_output(ops::store_kv(g, v_state, b.linear(L.cross.v, x), e.cache_rows));
        }
        e.executor = std::make_unique<Executor>(g, mode_);
    });
}

void TransformerSession::encode(std::span<const std::vector<int32_t>> sources, ThreadPool& pool) {
    const TransformerConfig& c = model_.config();
    if (sources.empty()) fail("model", "nothing to encode (no sources)");
    if (static_cast<int64_t>(sources.size()) > n_sources_)
        fail("model", "{} sources, but the session has room for {}", sources.size(), n_sources_);
    int64_t length = 0;
    for (size_t s = 0; s < sources.size(); ++s) {
        const auto len = static_cast<int64_t>(sources[s].size());
        if (len == 0) fail("model", "source {} is empty", s);
        if (len > max_source_)
            fail("model", "source {} is {} tokens, longer than the encoder's context of {}", s, len, max_source_);
        for (int32_t t : sources[s])
            if (t < 0 || t >= c.n_vocab) fail("model", "token id {} is outside the vocabulary of {}", t, c.n_vocab);
        length = std::max(length, len);
    }
    const auto count = static_cast<int64_t>(sources.size());
    EncoderGraph& e = encoder_graph(count, length);
    Graph& g = e.graph;
    const int64_t n = count * length;
    auto* tokens = reinterpret_cast<int32_t*>(g.node(e.tokens).data);
    auto* positions = reinterpret_cast<int32_t*>(g.node(e.positions).data);
    auto* limits = reinterpret_cast<int32_t*>(g.node(e.limits).data);
    auto* rows = reinterpret_cast<int32_t*>(g.node(e.cache_rows).data);
    auto* mask = reinterpret_cast<int8_t*>(g.node(e.mask).data);
    std::memset(mask, 0, static_cast<size_t>(n * n));
    for (int64_t s = 0; s < count; ++s) {
        const auto len = static_cast<int64_t>(sources[static_cast<size_t>(s)].size());
        for (int64_t p = 0; p < length; ++p) {
            const int64_t i = s * length + p;
            const bool real = p < len;
            // Padding takes the pad id where there is one (any id would do: it is masked).
            tokens[i] = real ? sources[static_cast<size_t>(s)][static_cast<size_t>(p)] : std::max(c.pad, 0);
            positions[i] = static_cast<int32_t>(p);
            limits[i] = static_cast<int32_t>(n - 1);  // not causal: the mask alone limits attention
            // Padding rows go past the cross caches' rows of this source's real tokens, out of every slot's view.
            rows[i] = static_cast<int32_t>(s * max_source_ + p);
            // Every row, padding included, attends to its own source's real tokens: no row is ever
            // fully masked, and no real token sees padding.
            std::memset(mask + i * n + s * length, 1, static_cast<size_t>(len));
        }
        source_length_[static_cast<size_t>(s)] = len;
    }
    for (int64_t s = count; s < n_sources_; ++s) source_length_[static_cast<size_t>(s)] = 0;
    e.executor->run(pool);
    targets_.clear();
    for (int64_t slot = 0; slot < targets_.n_slots(); ++slot)
        source_of_slot_[static_cast<size_t>(slot)] = slot < count ? slot : 0;
}

void TransformerSession::set_source(int64_t slot, int64_t source) {
    if (slot < 0 || slot >= targets_.n_slots()) fail("model", "target slot {} is out of range", slot);
    if (source < 0 || source >= n_sources_ || source_length_[static_cast<size_t>(source)] == 0)
        fail("model", "source {} has not been encoded", source);
    source_of_slot_[static_cast<size_t>(slot)] = source;
}

TransformerSession::DecoderGraph& TransformerSession::decoder_graph(int64_t n) {
    return cached_graph(decoders_, n, [&](DecoderGraph& d) {
        Graph& g = d.graph;
        Builder b{g, model_};
        const TransformerConfig& c = model_.config();
        const int64_t cross_rows = n_sources_ * max_source_;
        d.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        d.positions = g.input("positions", DType::I32, Shape::of({n}));
        d.cache_rows = g.input("cache_rows", DType::I32, Shape::of({n}));
        d.self_mask = targets_.n_slots() > 1 ? g.input("slot_mask", DType::I8, Shape::of({targets_.cache_rows(), n}))
                                             : kNoNode;
        d.cross_limits = g.input("cross_limits", DType::I32, Shape::of({n}));
        d.cross_mask = g.input("cross_mask", DType::I8, Shape::of({cross_rows, n}));
        const Shape self_shape = Shape::of({c.dim, targets_.cache_rows()});
        const Shape cross_shape = Shape::of({c.dim, cross_rows});
        NodeId x = b.embed(model_.target_embedding(), d.tokens, d.positions);
        for (size_t i = 0; i < model_.decoder_layers().size(); ++i) {
            const TransformerModel::DecoderLayer& L = model_.decoder_layers()[i];
            const auto layer = static_cast<int64_t>(i);
            x = b.residual(L.attn_norm, x, [&](NodeId h) {
                const NodeId k_cache = g.state(fmt::format("cache_k.{}", i), DType::F32, self_shape, targets_.keys(layer));
                const NodeId v_cache =
                    g.state(fmt::format("cache_v.{}", i), DType::F32, self_shape, targets_.values(layer));
                const NodeId keys = ops::store_kv(g, k_cache, b.linear(L.self.k, h), d.cache_rows);
                const NodeId values = ops::store_kv(g, v_cache, b.linear(L.self.v, h), d.cache_rows);
                const NodeId a = ops::attention(g, b.linear(L.self.q, h), keys, values, d.cache_rows, d.self_mask,
                                                c.n_heads, c.n_heads, c.head_dim);
                return b.linear(L.self.o, a);
            });
            x = b.residual(L.cross_norm, x, [&](NodeId h) {
                const NodeId keys = g.state(fmt::format("cross_k.{}", i), DType::F32, cross_shape, cross_k_[i].data());
                const NodeId values = g.state(fmt::format("cross_v.{}", i), DType::F32, cross_shape, cross_v_[i].data());
                const NodeId a = ops::attention(g, b.linear(L.cross.q, h), keys, values, d.cross_limits, d.cross_mask,
                                                c.n_heads, c.n_heads, c.head_dim);
                return b.linear(L.cross.o, a);
            });
            x = b.residual(L.ffn_norm, x, [&](NodeId h) { return b.ffn(L.up, L.down, h); });
        }
        if (const auto* norm = model_.decoder_norm()) x = b.norm(*norm, x);
        d.logits = b.linear(model_.output(), x);
        g.mark_output(d.logits);
        d.executor = std::make_unique<Executor>(g, mode_);
    });
}

std::span<const float> TransformerSession::decode(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                                  ThreadPool& pool) {
    const TransformerConfig& c = model_.config();
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) fail("model", "nothing to decode (no tokens)");
    if (slots.size() != tokens.size()) fail("model", "{} tokens but {} slots", tokens.size(), slots.size());
    for (int32_t t : tokens)
        if (t < 0 || t >= c.n_vocab) fail("model", "token id {} is outside the vocabulary of {}", t, c.n_vocab);
    targets_.plan(slots, batch_);
    for (int32_t s : slots)
        if (source_length_[static_cast<size_t>(source_of_slot_[static_cast<size_t>(s)])] == 0)
            fail("model", "target slot {} has no encoded source (call encode first)", s);
    DecoderGraph& d = decoder_graph(n);
    Graph& g = d.graph;
    const int64_t cross_rows = n_sources_ * max_source_;
    std::memcpy(g.node(d.tokens).data, tokens.data(), tokens.size_bytes());
    std::memcpy(g.node(d.positions).data, batch_.positions.data(), batch_.positions.size() * sizeof(int32_t));
    std::memcpy(g.node(d.cache_rows).data, batch_.cache_rows.data(), batch_.cache_rows.size() * sizeof(int32_t));
    if (d.self_mask != kNoNode) std::memcpy(g.node(d.self_mask).data, batch_.mask.data(), batch_.mask.size());
    auto* limits = reinterpret_cast<int32_t*>(g.node(d.cross_limits).data);
    auto* mask = reinterpret_cast<int8_t*>(g.node(d.cross_mask).data);
    std::memset(mask, 0, static_cast<size_t>(cross_rows * n));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t source = source_of_slot_[static_cast<size_t>(slots[static_cast<size_t>(i)])];
        limits[i] = static_cast<int32_t>(cross_rows - 1);
        std::memset(mask + i * cross_rows + source * max_source_, 1,
                    static_cast<size_t>(source_length_[static_cast<size_t>(source)]));
    }
    d.executor->run(pool);
    targets_.commit(slots);
    const Node& logits = g.node(d.logits);
    return {logits.row(0), static_cast<size_t>(logits.shape.elements())};
}

void TransformerSession::reorder(std::span<const int32_t> parents) {
    std::vector<int64_t> sources(source_of_slot_.size(), source_of_slot_.empty() ? 0 : source_of_slot_[0]);
    for (size_t i = 0; i < parents.size() && i < sources.size(); ++i)
        if (parents[i] >= 0 && parents[i] < static_cast<int32_t>(source_of_slot_.size()))
            sources[i] = source_of_slot_[static_cast<size_t>(parents[i])];
    targets_.reorder(parents);  // validates the parents
    source_of_slot_ = std::move(sources);
}

}  // namespace kiln
