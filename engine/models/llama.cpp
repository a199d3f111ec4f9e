#include "engine/models/llama.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/models/model_tensors.h"

namespace kiln {

namespace mt = model_tensors;

LlamaModel::LlamaModel(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    const GgufFile& f = *file_;
    const std::string arch = f.get_string("general.architecture");
    if (arch != "llama") fail("model", "{}: architecture '{}' is not supported by kiln yet (supported: llama)", f.name(), arch);

    LlamaConfig& c = config_;
    c.dim = mt::positive(f, "llama.embedding_length");
    c.n_layers = mt::positive(f, "llama.block_count");
    c.n_heads = mt::positive(f, "llama.attention.head_count");
    c.n_kv_heads = f.find("llama.attention.head_count_kv") ? mt::positive(f, "llama.attention.head_count_kv") : c.n_heads;
    c.ffn_dim = mt::positive(f, "llama.feed_forward_length");
    c.n_ctx_train = mt::positive(f, "llama.context_length");
    if (c.dim % c.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
    if (c.n_heads % c.n_kv_heads != 0)
        fail("model", "{}: {} heads cannot share {} key/value heads", f.name(), c.n_heads, c.n_kv_heads);
    c.head_dim = c.dim / c.n_heads;
    c.n_rot = f.find("llama.rope.dimension_count") ? mt::positive(f, "llama.rope.dimension_count") : c.head_dim;
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
    output_norm_ = mt::find(f, "output_norm.weight", {d}, mt::Role::Vector);
    output_ = mt::find(f, "output.weight", {d, vocab}, mt::Role::Matrix, false);
    if (output_ == nullptr) output_ = mt::find(f, "token_embd.weight", {d, vocab}, mt::Role::Matrix);  // tied head

    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = fmt::format("blk.{}.", i);
        layers_.push_back(Layer{
            mt::find(f, p + "attn_norm.weight", {d}, mt::Role::Vector),
            mt::find(f, p + "attn_q.weight", {d, d}, mt::Role::Matrix),
            mt::find(f, p + "attn_k.weight", {d, kv}, mt::Role::Matrix),
            mt::find(f, p + "attn_v.weight", {d, kv}, mt::Role::Matrix),
            mt::find(f, p + "attn_output.weight", {d, d}, mt::Role::Matrix),
            mt::find(f, p + "ffn_norm.weight", {d}, mt::Role::Vector),
            mt::find(f, p + "ffn_gate.weight", {d, ffn}, mt::Role::Matrix),
            mt::find(f, p + "ffn_up.weight", {d, ffn}, mt::Role::Matrix),
            mt::find(f, p + "ffn_down.weight", {ffn, d}, mt::Role::Matrix),
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

LlamaContext::LlamaContext(const LlamaModel& model, int64_t n_ctx, Executor::Mode mode, DType cache_type)
    : session_(new_llama_session(model, n_ctx, 1, mode, cache_type)) {}

}  // namespace kiln
