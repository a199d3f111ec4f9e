#include "engine/models/gpt2.h"

#include "engine/core/error.h"
#include "engine/models/model_tensors.h"
#include "engine/models/slot_decoder.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace mt = model_tensors;

Gpt2Model::Gpt2Model(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    const GgufFile& f = *file_;
    const std::string arch = f.get_string("general.architecture");
    if (arch != "gpt2") fail("model", "{}: architecture '{}' is not gpt2", f.name(), arch);
    Gpt2Config& c = config_;
    c.dim = mt::positive(f, "gpt2.embedding_length");
    c.n_layers = mt::positive(f, "gpt2.block_count");
    c.n_heads = mt::positive(f, "gpt2.attention.head_count");
    c.ffn_dim = mt::positive(f, "gpt2.feed_forward_length");
    c.n_ctx_train = mt::positive(f, "gpt2.context_length");
    c.norm_eps = mt::number_or(f, "gpt2.attention.layer_norm_epsilon", 1e-5f);
    if (!(c.norm_eps > 0)) fail("model", "{}: gpt2.attention.layer_norm_epsilon must be positive", f.name());
    if (c.dim % c.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
    c.head_dim = c.dim / c.n_heads;

    const auto d = static_cast<uint64_t>(c.dim), ffn = static_cast<uint64_t>(c.ffn_dim);
    const GgufTensor* embd = f.find_tensor("token_embd.weight");
    if (embd == nullptr) fail("model", "{}: tensor 'token_embd.weight' is missing", f.name());
    if (embd->dims.size() != 2) fail("model", "{}: tensor 'token_embd.weight' must be 2-D", f.name());
    c.n_vocab = static_cast<int64_t>(embd->dims[1]);
    const auto vocab = static_cast<uint64_t>(c.n_vocab);
    token_embd_ = mt::find(f, "token_embd.weight", {d, vocab}, mt::Role::Table);
    position_embd_ = mt::find(f, "position_embd.weight", {d, static_cast<uint64_t>(c.n_ctx_train)}, mt::Role::Table);
    output_ = mt::find(f, "output.weight", {d, vocab}, mt::Role::Matrix, false);
    if (output_ == nullptr) output_ = mt::find(f, "token_embd.weight", {d, vocab}, mt::Role::Matrix);  // tied head

    auto affine = [&](const std::string& name, std::vector<uint64_t> dims, bool matrix) {
        const uint64_t out = dims.back();
        return Affine{mt::find(f, name + ".weight", dims, matrix ? mt::Role::Matrix : mt::Role::Vector),
                      mt::find(f, name + ".bias", {out}, mt::Role::Vector, false)};
    };
    output_norm_ = affine("output_norm", {d}, false);
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = fmt::format("blk.{}.", i);
        layers_.push_back(Layer{
            affine(p + "attn_norm", {d}, false),
            affine(p + "attn_qkv", {d, 3 * d}, true),
            affine(p + "attn_output", {d, d}, true),
            affine(p + "ffn_norm", {d}, false),
            affine(p + "ffn_up", {d, ffn}, true),
            affine(p + "ffn_down", {ffn, d}, true),
        });
    }
    info_ = ModelInfo{arch, c.n_vocab, c.n_ctx_train, mt::parameter_count(f), mt::weight_bytes(f)};
}

namespace {

class Gpt2Session final : public SlotDecoderSession {
public:
    Gpt2Session(const Gpt2Model& model, int64_t n_ctx, int64_t n_slots, Executor::Mode mode, DType cache_type)
        : SlotDecoderSession(model.config().n_vocab, model.config().n_layers, model.config().dim, n_ctx, n_slots, mode,
                             cache_type),
          model_(model) {}

private:
    NodeId build_forward(Graph& g, const Inputs& in, bool last_only) override {
        const Gpt2Config& c = model_.config();
        auto bias_of = [&](NodeId x, const GgufTensor* bias) { return bias ? ops::add(g, x, mt::leaf(g, *bias)) : x; };
        auto linear = [&](const Gpt2Model::Affine& a, NodeId x) {
            return bias_of(ops::matmul(g, mt::leaf(g, *a.weight), x), a.bias);
        };
        auto norm = [&](const Gpt2Model::Affine& a, NodeId x) {
            return ops::layer_norm(g, x, mt::leaf(g, *a.weight), a.bias ? mt::leaf(g, *a.bias) : kNoNode, c.norm_eps);
        };
        // The fused QKV matrix is three matrices of d rows each, one after the other.
        auto qkv_part = [&](const Gpt2Model::Affine& qkv, int part, NodeId x) {
            const NodeId y = ops::matmul(g, mt::leaf_rows(g, *qkv.weight, part * c.dim, c.dim), x);
            return qkv.bias ? ops::add(g, y, mt::leaf_rows(g, *qkv.bias, part * c.dim, c.dim)) : y;
        };

        NodeId x = ops::add(g, ops::get_rows(g, mt::leaf(g, model_.token_embedding()), in.tokens),
                            ops::get_rows(g, mt::leaf(g, model_.position_embedding()), in.positions));
        for (size_t i = 0; i < model_.layers().size(); ++i) {
            const Gpt2Model::Layer& L = model_.layers()[i];
            const NodeId h = norm(L.attn_norm, x);
            const NodeId q = qkv_part(L.qkv, 0, h);
            const NodeId keys = ops::store_kv(g, key_cache(g, static_cast<int64_t>(i)), qkv_part(L.qkv, 1, h), in.cache_rows);
            const NodeId values =
                ops::store_kv(g, value_cache(g, static_cast<int64_t>(i)), qkv_part(L.qkv, 2, h), in.cache_rows);
            const NodeId a = ops::attention(g, q, keys, values, in.cache_rows, in.mask, c.n_heads, c.n_heads, c.head_dim);
            x = ops::add(g, x, linear(L.attn_out, a));
            x = ops::add(g, x, linear(L.down, ops::gelu(g, linear(L.up, norm(L.ffn_norm, x)))));
        }
        if (last_only && in.n > 1) x = ops::take_rows(g, x, in.n - 1, 1);
        x = norm(model_.output_norm(), x);
        return ops::matmul(g, mt::leaf(g, model_.output()), x);
    }

    const Gpt2Model& model_;
};

}  // namespace

std::unique_ptr<CausalSession> Gpt2Model::new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                                      DType cache_type) const {
    if (n_ctx < 1 || n_ctx > config_.n_ctx_train)
        fail("model", "context {} is outside 1..{}, the positions this gpt2 model has", n_ctx, config_.n_ctx_train);
    return std::make_unique<Gpt2Session>(*this, n_ctx, n_slots, mode, cache_type);
}

}  // namespace kiln
