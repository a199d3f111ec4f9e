// LlamaModel behind the CausalLm interface: sessions with sequence slots.
#include "engine/models/llama.h"
#include "engine/models/model_tensors.h"
#include "engine/models/slot_decoder.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace {

class LlamaSession final : public SlotDecoderSession {
public:
    LlamaSession(const LlamaModel& model, int64_t n_ctx, int64_t n_slots, Executor::Mode mode, DType cache_type)
        : SlotDecoderSession(model.config().n_vocab, model.config().n_layers, model.config().kv_dim(), n_ctx, n_slots,
                             mode, cache_type),
          model_(model) {}

private:
    NodeId build_forward(Graph& g, const Inputs& in, bool last_only) override {
        const LlamaConfig& cfg = model_.config();
        auto w = [&](const GgufTensor& t) { return model_tensors::leaf(g, t, model_.tensor_data(t)); };
        NodeId x = ops::get_rows(g, w(model_.token_embedding()), in.tokens);
        for (size_t i = 0; i < model_.layers().size(); ++i) {
            const LlamaModel::Layer& L = model_.layers()[i];
            NodeId h = ops::rms_norm(g, x, w(*L.attn_norm), cfg.norm_eps);
            NodeId q = ops::matmul(g, w(*L.wq), h);
            NodeId k = ops::matmul(g, w(*L.wk), h);
            const NodeId v = ops::matmul(g, w(*L.wv), h);
            q = ops::rope(g, q, in.positions, cfg.n_heads, cfg.head_dim, cfg.n_rot, cfg.rope_base);
            k = ops::rope(g, k, in.positions, cfg.n_kv_heads, cfg.head_dim, cfg.n_rot, cfg.rope_base);
            const NodeId keys = ops::store_kv(g, key_cache(g, static_cast<int64_t>(i)), k, in.cache_rows);
            const NodeId values = ops::store_kv(g, value_cache(g, static_cast<int64_t>(i)), v, in.cache_rows);
            const NodeId a =
                ops::attention(g, q, keys, values, in.cache_rows, in.mask, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
            x = ops::add(g, x, ops::matmul(g, w(*L.wo), a));
            h = ops::rms_norm(g, x, w(*L.ffn_norm), cfg.norm_eps);
            const NodeId gate = ops::matmul(g, w(*L.w_gate), h);
            const NodeId up = ops::matmul(g, w(*L.w_up), h);
            x = ops::add(g, x, ops::matmul(g, w(*L.w_down), ops::swiglu(g, gate, up)));
        }
        if (last_only && in.n > 1) x = ops::take_rows(g, x, in.n - 1, 1);
        x = ops::rms_norm(g, x, w(model_.output_norm()), cfg.norm_eps);
        return ops::matmul(g, w(model_.output()), x);
    }

    const LlamaModel& model_;
};

}  // namespace

LlamaLm::LlamaLm(std::shared_ptr<const GgufFile> file) : model_(std::move(file)) {
    const LlamaConfig& c = model_.config();
    info_ = ModelInfo{"llama", c.n_vocab, c.n_ctx_train, model_.parameter_count(), model_.weight_bytes()};
}

std::unique_ptr<CausalSession> new_llama_session(const LlamaModel& model, int64_t n_ctx, int64_t n_slots,
                                                 Executor::Mode mode, DType cache_type) {
    return std::make_unique<LlamaSession>(model, n_ctx, n_slots, mode, cache_type);
}

std::unique_ptr<CausalSession> LlamaLm::new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                                    DType cache_type) const {
    return new_llama_session(model_, n_ctx, n_slots, mode, cache_type);
}

}  // namespace kiln
