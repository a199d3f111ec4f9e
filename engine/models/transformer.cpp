#include "engine/models/transformer.h"

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/models/graph_cache.h"
#include "engine/models/affine.h"
#include "engine/models/model_tensors.h"
#include "engine/models/transformer_block.h"
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

TransformerConfig check_transformer(const GgufFile& f) {
    TransformerConfig c;
    static_cast<arch::TransformerParams&>(c) = arch::TransformerParams::read(f);
    c.bos = token_id_or(f, "tokenizer.ggml.bos_token_id", c.n_vocab);
    c.eos = token_id_or(f, "tokenizer.ggml.eos_token_id", c.n_vocab);
    c.pad = token_id_or(f, "tokenizer.ggml.padding_token_id", c.n_vocab);
    if (c.bos < 0) fail("model", "{}: tokenizer.ggml.bos_token_id (the decoder's start token) is missing", f.name());
    if (c.eos < 0) fail("model", "{}: tokenizer.ggml.eos_token_id is missing", f.name());

    const auto t = arch::transformer_tensors<const GgufTensor*>(c, [&](const arch::TensorSpec& s) { return mt::find(f, s); });
    const GgufTensor* target_embd = t.dec_token_embd != nullptr ? t.dec_token_embd : t.token_embd;
    if (t.output.weight == nullptr) mt::find_tied_head(f, c.dim, c.n_vocab, target_embd->name);
    return c;
}

TransformerModel::TransformerModel(std::shared_ptr<const GgufFile> file, WeightPlacement placement)
    : file_(std::move(file)), config_(check_transformer(*file_)) {
    const GgufFile& f = *file_;
    const TransformerConfig& c = config_;
    placement_ = std::make_unique<ResidentWeights>(f, placement);
    leaves_ = std::make_unique<WeightLeaves>(f, *placement_);
    positions_ = sinusoidal_positions(c.dim, c.n_ctx);
    info_ = ModelInfo{std::string(arch::kTransformer), c.n_vocab, c.n_ctx, mt::parameter_count(f), mt::weight_bytes(f)};
}

arch::TransformerTensors<NodeId> TransformerModel::leaves(Graph& g) const {
    return arch::transformer_tensors<NodeId>(config_, [&](const arch::TensorSpec& s) { return (*leaves_)(g, s); });
}

namespace {

// The sinusoidal rows of a graph's I32 positions, from the model's table.
std::function<NodeId(Graph&)> position_rows(const TransformerModel& model, NodeId positions) {
    return [&model, positions](Graph& g) {
        const TransformerConfig& c = model.config();
        const NodeId table = g.weight("sinusoidal_positions", DType::F32, Shape::of({c.dim, c.n_ctx}),
                                      model.positions_table().data());
        return ops::get_rows(g, table, positions);
    };
}

// An encoder's self-attention over its own batch: every row sees the rows the mask allows.
class MaskedKeyValues final : public KeyValueReader {
public:
    MaskedKeyValues(NodeId limits, NodeId mask) : limits_(limits), mask_(mask) {}
    NodeId attend(Graph& g, int64_t, NodeId q, NodeId k, NodeId v, const HeadLayout& h) override {
        return ops::cached_attention(g, q, k, v, limits_, mask_, h.n_heads, h.n_kv_heads, h.head_dim);
    }

private:
    NodeId limits_, mask_;
};

// A decoder's self-attention through the target slots' KV caches.
class TargetCache final : public KeyValueReader {
public:
    TargetCache(SequenceSlots& slots, int64_t dim, NodeId cache_rows, NodeId mask)
        : slots_(slots), shape_(Shape::of({dim, slots.cache_rows()})), rows_(cache_rows), mask_(mask) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& h) override {
        const NodeId k_cache = g.state(fmt::format("cache_k.{}", layer), DType::F32, shape_, slots_.keys(layer));
        const NodeId v_cache = g.state(fmt::format("cache_v.{}", layer), DType::F32, shape_, slots_.values(layer));
        const NodeId keys = ops::store_kv(g, k_cache, k, rows_);
        const NodeId values = ops::store_kv(g, v_cache, v, rows_);
        return ops::cached_attention(g, q, keys, values, rows_, mask_, h.n_heads, h.n_kv_heads, h.head_dim);
    }

private:
    SequenceSlots& slots_;
    Shape shape_;
    NodeId rows_, mask_;
};

// Cross-attention over the keys and values the encoder graph stored for every source.
class SourceCache final : public CrossKeyValueReader {
public:
    SourceCache(std::vector<std::vector<float>>& keys, std::vector<std::vector<float>>& values, Shape shape,
                NodeId limits, NodeId mask)
        : keys_(keys), values_(values), shape_(shape), limits_(limits), mask_(mask) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, const arch::AttentionTensors<NodeId>&, const HeadLayout& h) override {
        const auto i = static_cast<size_t>(layer);
        const NodeId k = g.state(fmt::format("cross_k.{}", i), DType::F32, shape_, keys_[i].data());
        const NodeId v = g.state(fmt::format("cross_v.{}", i), DType::F32, shape_, values_[i].data());
        return ops::cached_attention(g, q, k, v, limits_, mask_, h.n_heads, h.n_kv_heads, h.head_dim);
    }

private:
    std::vector<std::vector<float>>& keys_;
    std::vector<std::vector<float>>& values_;
    Shape shape_;
    NodeId limits_, mask_;
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
        const TransformerConfig& c = model_.config();
        const int64_t n = n_sources * length;
        e.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        e.positions = g.input("positions", DType::I32, Shape::of({n}));
        e.limits = g.input("attention_limits", DType::I32, Shape::of({n}));
        e.mask = g.input("source_mask", DType::I8, Shape::of({n, n}));
        e.cache_rows = g.input("cross_rows", DType::I32, Shape::of({n}));
        const arch::TransformerTensors<NodeId> w = model_.leaves(g);
        MaskedKeyValues self(e.limits, e.mask);
        const NodeId memory =
            transformer_encode(g, c, w, StackInputs{e.tokens, position_rows(model_, e.positions), &self}, Dropout{});
        // Every decoder layer's cross-attention keys and values of the encoder output, computed once.
        const Shape cross_shape = Shape::of({c.dim, n_sources_ * max_source_});
        for (size_t i = 0; i < w.decoder.size(); ++i) {
            const arch::AttentionTensors<NodeId>& cross = w.decoder[i].cross_attn;
            const NodeId k_state = g.state(fmt::format("cross_k.{}", i), DType::F32, cross_shape, cross_k_[i].data());
            const NodeId v_state = g.state(fmt::format("cross_v.{}", i), DType::F32, cross_shape, cross_v_[i].data());
            g.mark_output(ops::store_kv(g, k_state, linear(g, cross.k, memory), e.cache_rows));
            g.mark_output(ops::store_kv(g, v_state, linear(g, cross.v, memory), e.cache_rows));
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
        const TransformerConfig& c = model_.config();
        const int64_t cross_rows = n_sources_ * max_source_;
        d.tokens = g.input("tokens", DType::I32, Shape::of({n}));
        d.positions = g.input("positions", DType::I32, Shape::of({n}));
        d.cache_rows = g.input("cache_rows", DType::I32, Shape::of({n}));
        d.self_mask = targets_.n_slots() > 1 ? g.input("slot_mask", DType::I8, Shape::of({targets_.cache_rows(), n}))
                                             : kNoNode;
        d.cross_limits = g.input("cross_limits", DType::I32, Shape::of({n}));
        d.cross_mask = g.input("cross_mask", DType::I8, Shape::of({cross_rows, n}));
        TargetCache self(targets_, c.dim, d.cache_rows, d.self_mask);
        SourceCache cross(cross_k_, cross_v_, Shape::of({c.dim, cross_rows}), d.cross_limits, d.cross_mask);
        d.logits = transformer_decode(g, c, model_.leaves(g), StackInputs{d.tokens, position_rows(model_, d.positions), &self},
                                      cross, Dropout{});
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
