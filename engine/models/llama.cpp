#include "engine/models/llama.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/kernels/matmul.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace {

const GgufTensor* find_checked(const GgufFile& f, const std::string& name, std::vector<uint64_t> dims, bool matrix,
                               bool required = true) {
    const GgufTensor* t = f.find_tensor(name);
    if (t == nullptr) {
        if (!required) return nullptr;
        fail("model", "{}: tensor '{}' is missing", f.name(), name);
    }
    if (t->dims != dims)
        fail("model", "{}: tensor '{}' has shape [{}], expected [{}]", f.name(), name, fmt::join(t->dims, ", "),
             fmt::join(dims, ", "));
    if (matrix && !kernels::matmul_supports(t->type))
        fail("model", "{}: tensor '{}' has type {}, which kiln cannot multiply with (f32, f16, bf16, q8_0, q4_0)",
             f.name(), name, dtype_name(t->type));
    if (!matrix && t->type != DType::F32)
        fail("model", "{}: tensor '{}' has type {} (norm weights must be f32)", f.name(), name, dtype_name(t->type));
    return t;
}

int64_t positive(const GgufFile& f, const char* key) {
    const int64_t v = f.get_int(key);
    if (v < 1 || v > (int64_t{1} << 24)) fail("model", "{}: {} is {} (out of range)", f.name(), key, v);
    return v;
}

}  // namespace

LlamaModel::LlamaModel(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    const GgufFile& f = *file_;
    const std::string arch = f.get_string("general.architecture");
    if (arch != "llama") fail("model", "{}: architecture '{}' is not supported by kiln yet (supported: llama)", f.name(), arch);

    LlamaConfig& c = config_;
    c.dim = positive(f, "llama.embedding_length");
    c.n_layers = positive(f, "llama.block_count");
    c.n_heads = positive(f, "llama.attention.head_count");
    c.n_kv_heads = f.find("llama.attention.head_count_kv") ? positive(f, "llama.attention.head_count_kv") : c.n_heads;
    c.ffn_dim = positive(f, "llama.feed_forward_length");
    c.n_ctx_train = positive(f, "llama.context_length");
    if (c.dim % c.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
    if (c.n_heads % c.n_kv_heads != 0)
        fail("model", "{}: {} heads cannot share {} key/value heads", f.name(), c.n_heads, c.n_kv_heads);
    c.head_dim = c.dim / c.n_heads;
    c.n_rot = f.find("llama.rope.dimension_count") ? positive(f, "llama.rope.dimension_count") : c.head_dim;
    if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
        fail("model", "{}: llama.rope.dimension_count {} does not fit heads of {}", f.name(), c.n_rot, c.head_dim);
    if (f.find("llama.attention.layer_norm_rms_epsilon"))
        c.norm_eps = static_cast<float>(f.get_number("llama.attention.layer_norm_rms_epsilon"));
    if (f.find("llama.rope.freq_base")) c.rope_base = static_cast<float>(f.get_number("llama.rope.freq_base"));

    const auto d = static_cast<uint64_t>(c.dim), ffn = static_cast<uint64_t>(c.ffn_dim),
               kv = static_cast<uint64_t>(c.kv_dim());
    const GgufTensor* embd = f.find_tensor("token_embd.weight");
    if (embd == nullptr) fail("model", "{}: tensor 'token_embd.weight' is missing", f.name());
    if (embd->dims.size() != 2 || embd->dims[0] != d)
        fail("model", "{}: tensor 'token_embd.weight' has shape [{}], expected [{}, n_vocab]", f.name(),
             fmt::join(embd->dims, ", "), d);
    c.n_vocab = static_cast<int64_t>(embd->dims[1]);
    if (type_traits(embd->type).to_float == nullptr)
        fail("model", "{}: tensor 'token_embd.weight' has type {}, which kiln cannot read", f.name(), dtype_name(embd->type));
    token_embd_ = embd;
    const auto vocab = static_cast<uint64_t>(c.n_vocab);
    output_norm_ = find_checked(f, "output_norm.weight", {d}, false);
    output_ = find_checked(f, "output.weight", {d, vocab}, true, false);
    if (output_ == nullptr) output_ = find_checked(f, "token_embd.weight", {d, vocab}, true);  // tied head

    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = fmt::format("blk.{}.", i);
        layers_.push_back(Layer{
            find_checked(f, p + "attn_norm.weight", {d}, false),
            find_checked(f, p + "attn_q.weight", {d, d}, true),
            find_checked(f, p + "attn_k.weight", {d, kv}, true),
            find_checked(f, p + "attn_v.weight", {d, kv}, true),
            find_checked(f, p + "attn_output.weight", {d, d}, true),
            find_checked(f, p + "ffn_norm.weight", {d}, false),
            find_checked(f, p + "ffn_gate.weight", {d, ffn}, true),
            find_checked(f, p + "ffn_up.weight", {d, ffn}, true),
            find_checked(f, p + "ffn_down.weight", {ffn, d}, true),
        });
    }
    resident_ = std::make_unique<ResidentWeights>(f);
}

uint64_t LlamaModel::parameter_count() const noexcept {
    uint64_t n = 0;
    for (const GgufTensor& t : file_->tensors()) n += t.elements;
    return n;
}

uint64_t LlamaModel::weight_bytes() const noexcept {
    uint64_t n = 0;
    for (const GgufTensor& t : file_->tensors()) n += t.data.size();
    return n;
}

LlamaContext::LlamaContext(const LlamaModel& model, int64_t n_ctx, Executor::Mode mode)
    : model_(model), n_ctx_(n_ctx), mode_(mode) {
    if (n_ctx < 1) fail("model", "the context size must be positive, got {}", n_ctx);
    const auto cache_floats = static_cast<size_t>(n_ctx * model.config().kv_dim());
    k_cache_.assign(static_cast<size_t>(model.config().n_layers), std::vector<float>(cache_floats));
    v_cache_.assign(static_cast<size_t>(model.config().n_layers), std::vector<float>(cache_floats));
}

void LlamaContext::build(Compiled& c, int64_t n, bool all_logits) {
    const LlamaConfig& cfg = model_.config();
    Graph& g = c.graph;
    auto weight = [&](const GgufTensor& t) {
        Shape s = t.dims.size() == 1 ? Shape::of({static_cast<int64_t>(t.dims[0])})
                                     : Shape::of({static_cast<int64_t>(t.dims[0]), static_cast<int64_t>(t.dims[1])});
        return g.weight(t.name, t.type, s, model_.tensor_data(t));
    };
    c.tokens = g.input("tokens", DType::I32, Shape::of({n}));
    c.positions = g.input("positions", DType::I32, Shape::of({n}));
    NodeId x = ops::get_rows(g, weight(model_.token_embedding()), c.tokens);
    for (size_t i = 0; i < model_.layers().size(); ++i) {
        const LlamaModel::Layer& L = model_.layers()[i];
        const Shape cache_shape = Shape::of({cfg.kv_dim(), n_ctx_});
        const NodeId k_cache = g.state(fmt::format("cache_k.{}", i), DType::F32, cache_shape, k_cache_[i].data());
        const NodeId v_cache = g.state(fmt::format("cache_v.{}", i), DType::F32, cache_shape, v_cache_[i].data());

        NodeId h = ops::rms_norm(g, x, weight(*L.attn_norm), cfg.norm_eps);
        NodeId q = ops::matmul(g, weight(*L.wq), h);
        NodeId k = ops::matmul(g, weight(*L.wk), h);
        const NodeId v = ops::matmul(g, weight(*L.wv), h);
        q = ops::rope(g, q, c.positions, cfg.n_heads, cfg.head_dim, cfg.n_rot, cfg.rope_base);
        k = ops::rope(g, k, c.positions, cfg.n_kv_heads, cfg.head_dim, cfg.n_rot, cfg.rope_base);
        const NodeId keys = ops::store_kv(g, k_cache, k, c.positions);
        const NodeId values = ops::store_kv(g, v_cache, v, c.positions);
        const NodeId a = ops::attention(g, q, keys, values, c.positions, kNoNode, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
        x = ops::add(g, x, ops::matmul(g, weight(*L.wo), a));

        h = ops::rms_norm(g, x, weight(*L.ffn_norm), cfg.norm_eps);
        const NodeId gate = ops::matmul(g, weight(*L.w_gate), h);
        const NodeId up = ops::matmul(g, weight(*L.w_up), h);
        x = ops::add(g, x, ops::matmul(g, weight(*L.w_down), ops::swiglu(g, gate, up)));
    }
    // Generation needs only the last token's logits: skip the head for the others.
    if (!all_logits && n > 1) x = ops::take_rows(g, x, n - 1, 1);
    x = ops::rms_norm(g, x, weight(model_.output_norm()), cfg.norm_eps);
    c.logits = ops::matmul(g, weight(model_.output()), x);
    g.mark_output(c.logits);
    c.executor = std::make_unique<Executor>(g, mode_);
}

LlamaContext::Compiled& LlamaContext::compiled(int64_t n_tokens, bool all_logits) {
    auto [it, inserted] = graphs_.try_emplace({n_tokens, all_logits});
    if (inserted) {
        try {
            build(it->second, n_tokens, all_logits);
        } catch (...) {
            graphs_.erase(it);
            throw;
        }
    }
    return it->second;
}

std::span<const float> LlamaContext::eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) fail("model", "nothing to evaluate (no tokens)");
    if (n_past_ + n > n_ctx_)
        fail("model", "{} more tokens do not fit the context: {} of {} positions are used (raise -c)", n, n_past_,
             n_ctx_);
    for (int32_t t : tokens)
        if (t < 0 || t >= model_.config().n_vocab)
            fail("model", "token id {} is outside the vocabulary of {}", t, model_.config().n_vocab);
    Compiled& c = compiled(n, all_logits);
    std::memcpy(c.graph.node(c.tokens).data, tokens.data(), tokens.size_bytes());
    auto* positions = reinterpret_cast<int32_t*>(c.graph.node(c.positions).data);
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(n_past_ + i);
    c.executor->run(pool);
    n_past_ += n;
    const Node& logits = c.graph.node(c.logits);
    return {logits.row(0), static_cast<size_t>(logits.shape.elements())};
}

}  // namespace kiln
