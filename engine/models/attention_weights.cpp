#include "engine/models/attention_weights.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/core/error.h"
#include "engine/graph/executor.h"
#include "engine/models/affine.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/transformer.h"
#include "engine/models/transformer_block.h"
#include "engine/ops/ops.h"

namespace kiln {

void attention_probabilities(std::span<const float> q, std::span<const float> k, int64_t n_q, int64_t n_k,
                             const HeadLayout& heads, bool causal, int64_t query_offset, std::vector<float>& out) {
    const int64_t hd = heads.head_dim, q_width = heads.n_heads * hd, k_width = heads.n_kv_heads * hd;
    if (static_cast<int64_t>(q.size()) != n_q * q_width || static_cast<int64_t>(k.size()) != n_k * k_width)
        fail("attention", "queries {} and keys {} do not fit {} x {} heads of {}", q.size(), k.size(), n_q, heads.n_heads,
             hd);
    const double scale = heads.scale > 0.0f ? heads.scale : 1.0 / std::sqrt(static_cast<double>(hd));
    const int64_t group = heads.n_heads / heads.n_kv_heads;
    std::vector<double> s(static_cast<size_t>(n_k));
    for (int64_t h = 0; h < heads.n_heads; ++h) {
        const int64_t kv_head = h / group;
        for (int64_t i = 0; i < n_q; ++i) {
            const int64_t position = query_offset + i;
            const int64_t last = causal ? std::min(position, n_k - 1) : n_k - 1;
            const int64_t first = causal && heads.window > 0 ? std::max<int64_t>(0, position - heads.window + 1) : 0;
            const float* qi = q.data() + i * q_width + h * hd;
            double max = -std::numeric_limits<double>::infinity();
            for (int64_t j = first; j <= last; ++j) {
                const float* kj = k.data() + j * k_width + kv_head * hd;
                double dot = 0;
                for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qi[d]) * kj[d];
                double score = dot * scale;
                if (heads.softcap > 0.0f) score = heads.softcap * std::tanh(score / heads.softcap);
                s[static_cast<size_t>(j)] = score;
                max = std::max(max, score);
            }
            double sum = 0;
            for (int64_t j = first; j <= last; ++j) sum += s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - max);
            for (int64_t j = 0; j < n_k; ++j)
                out.push_back(j < first || j > last ? 0.0f : static_cast<float>(s[static_cast<size_t>(j)] / sum));
        }
    }
}

namespace {

// Keeps every layer's queries and keys alive as graph outputs and passes the
// attention on to `inner`, which computes it as the model does.
class RecordingKeyValues final : public KeyValueReader {
public:
    explicit RecordingKeyValues(KeyValueReader& inner) : inner_(inner) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& heads) override {
        record(g, layer, q, k, heads);
        return inner_.attend(g, layer, q, k, v, heads);
    }
    struct Layer {
        NodeId q = kNoNode, k = kNoNode;
        HeadLayout heads;
    };
    void record(Graph& g, int64_t layer, NodeId q, NodeId k, const HeadLayout& heads) {
        if (layer != static_cast<int64_t>(layers.size())) fail("attention", "layer {} attends out of order", layer);
        g.mark_output(q);
        g.mark_output(k);
        layers.push_back({q, k, heads});
    }
    std::vector<Layer> layers;

private:
    KeyValueReader& inner_;
};

// The cached attention of an inference session (scale, soft cap, sliding
// window), over float caches of the pass's own tokens.
class WholeSequenceKeyValues final : public KeyValueReader {
public:
    WholeSequenceKeyValues(NodeId positions, int64_t n, int64_t kv_dim, int64_t n_layers)
        : positions_(positions), n_(n), kv_dim_(kv_dim), keys_(n_layers), values_(n_layers) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& h) override {
        const auto i = static_cast<size_t>(layer);
        if (i >= keys_.size()) fail("attention", "layer {} of {}", layer, keys_.size());
        keys_[i].assign(static_cast<size_t>(kv_dim_ * n_), 0.0f);
        values_[i].assign(static_cast<size_t>(kv_dim_ * n_), 0.0f);
        const Shape shape = Shape::of({kv_dim_, n_});
        const NodeId kc = g.state(fmt::format("record_k.{}", layer), DType::F32, shape, keys_[i].data());
        const NodeId vc = g.state(fmt::format("record_v.{}", layer), DType::F32, shape, values_[i].data());
        const NodeId keys = ops::store_kv(g, kc, k, positions_);
        const NodeId values = ops::store_kv(g, vc, v, positions_);
        return ops::cached_attention(g, q, keys, values, positions_, kNoNode, h.n_heads, h.n_kv_heads, h.head_dim,
                                     {h.scale, h.softcap, h.window});
    }

private:
    NodeId positions_;
    int64_t n_, kv_dim_;
    std::vector<std::vector<float>> keys_, values_;
};

std::span<const float> values_of(const Graph& g, NodeId id) {
    const Node& node = g.node(id);
    if (node.type != DType::F32) fail("attention", "node {} is {}, not F32", node.name, dtype_name(node.type));
    return {node.row(0), static_cast<size_t>(node.shape.elements())};
}

// The probabilities of every recorded layer, [layers, heads, n_q, n_k].
AttentionMaps maps_of(const Graph& g, const std::vector<RecordingKeyValues::Layer>& layers, int64_t n_q, int64_t n_k,
                      bool causal) {
    AttentionMaps m;
    m.layers = static_cast<int64_t>(layers.size());
    m.heads = layers.empty() ? 0 : layers.front().heads.n_heads;
    m.queries = n_q;
    m.keys = n_k;
    for (const RecordingKeyValues::Layer& L : layers) {
        if (L.heads.n_heads != m.heads) fail("attention", "layers with {} and {} heads", m.heads, L.heads.n_heads);
        attention_probabilities(values_of(g, L.q), values_of(g, L.k), n_q, n_k, L.heads, causal, 0, m.p);
    }
    return m;
}

void fill(Graph& g, NodeId id, std::span<const int32_t> values) {
    std::copy(values.begin(), values.end(), g.node(id).row<int32_t>(0));
}

std::vector<int32_t> positions_up_to(int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    return p;
}

}  // namespace

AttentionMaps record_decoder_attention(const DecoderLm& lm, std::span<const int32_t> tokens, ThreadPool& pool) {
    const DecoderShape& shape = lm.arch().shape();
    const auto n = static_cast<int64_t>(tokens.size());
    if (n < 1) fail("attention", "nothing to record (no tokens)");
    if (shape.learned_positions && n > shape.n_ctx_train)
        fail("attention", "{} tokens are more than the {} positions this model has", n, shape.n_ctx_train);
    for (int32_t t : tokens)
        if (t < 0 || t >= shape.n_vocab) fail("attention", "token id {} is outside the vocabulary of {}", t, shape.n_vocab);
    Graph g;
    BlockContext ctx;
    ctx.tokens = g.input("tokens", DType::I32, Shape::of({n}));
    ctx.positions = g.input("positions", DType::I32, Shape::of({n}));
    ctx.n = n;
    ctx.last_only = true;
    ctx.n_ctx = n;
    WholeSequenceKeyValues cache(ctx.positions, n, shape.kv_dim, shape.n_layers);
    RecordingKeyValues recorder(cache);
    ctx.attention = &recorder;
    g.mark_output(lm.arch().forward(g, ctx, lm.leaves()));
    Executor executor(g);
    fill(g, ctx.tokens, tokens);
    fill(g, ctx.positions, positions_up_to(n));
    executor.run(pool);
    return maps_of(g, recorder.layers, n, n, true);
}

namespace {

// Cross-attention over the encoder output `memory` (one source), its queries
// and keys kept as outputs.
class RecordingCrossKeyValues final : public CrossKeyValueReader {
public:
    explicit RecordingCrossKeyValues(NodeId memory) : memory_(memory) {}
    NodeId attend(Graph& g, int64_t layer, NodeId q, const arch::AttentionTensors<NodeId>& w,
                  const HeadLayout& heads) override {
        const NodeId k = linear(g, w.k, memory_);
        const NodeId v = linear(g, w.v, memory_);
        recorder_.record(g, layer, q, k, heads);
        return ops::sequence_attention(g, q, k, v, kNoNode, heads.n_heads, heads.n_kv_heads, heads.head_dim, 1, false,
                                       0.0f, kNoNode);
    }
    const std::vector<RecordingKeyValues::Layer>& layers() const { return recorder_.layers; }

private:
    NodeId memory_;
    BatchKeyValues unused_{1, 0.0f, kNoNode};
    RecordingKeyValues recorder_{unused_};
};

}  // namespace

Seq2SeqAttention record_seq2seq_attention(const TransformerModel& model, std::span<const int32_t> source,
                                          std::span<const int32_t> target, ThreadPool& pool) {
    const TransformerConfig& c = model.config();
    const auto n_s = static_cast<int64_t>(source.size()), n_t = static_cast<int64_t>(target.size());
    if (n_s < 1 || n_t < 1) fail("attention", "a source and a target of at least one token each are needed");
    if (n_s > c.n_ctx || n_t > c.n_ctx)
        fail("attention", "a source of {} and a target of {} tokens: at most {} each (the model's positions)", n_s, n_t,
             c.n_ctx);
    for (std::span<const int32_t> ids : {source, target})
        for (int32_t t : ids)
            if (t < 0 || t >= c.n_vocab) fail("attention", "token id {} is outside the vocabulary of {}", t, c.n_vocab);
    Graph g;
    const arch::TransformerTensors<NodeId> w = model.leaves(g);
    const NodeId table =
        g.weight("sinusoidal_positions", DType::F32, Shape::of({c.dim, c.n_ctx}), model.positions_table().data());
    const auto rows = [table](NodeId positions) {
        return [table, positions](Graph& graph) { return ops::get_rows(graph, table, positions); };
    };
    const NodeId src = g.input("source", DType::I32, Shape::of({n_s}));
    const NodeId src_pos = g.input("source_positions", DType::I32, Shape::of({n_s}));
    const NodeId tgt = g.input("target", DType::I32, Shape::of({n_t}));
    const NodeId tgt_pos = g.input("target_positions", DType::I32, Shape::of({n_t}));
    BatchKeyValues whole(1, 0.0f, kNoNode, false), causal(1, 0.0f, kNoNode, true);
    RecordingKeyValues encoder(whole), decoder(causal);
    const NodeId memory = transformer_encode(g, c, w, StackInputs{src, rows(src_pos), &encoder}, Dropout{});
    RecordingCrossKeyValues cross(memory);
    g.mark_output(transformer_decode(g, c, w, StackInputs{tgt, rows(tgt_pos), &decoder}, cross, Dropout{}));
    Executor executor(g);
    fill(g, src, source);
    fill(g, src_pos, positions_up_to(n_s));
    fill(g, tgt, target);
    fill(g, tgt_pos, positions_up_to(n_t));
    executor.run(pool);
    return {maps_of(g, encoder.layers, n_s, n_s, false), maps_of(g, decoder.layers, n_t, n_t, true),
            maps_of(g, cross.layers(), n_t, n_s, false)};
}

}  // namespace kiln
