#pragma once
// The `llama` architecture's GGUF schema, in one place: its hyper-parameters
// (read from and written to llama.cpp's metadata keys) and its tensors (names,
// shapes, roles, in the order llama.cpp's converters write them). The loader,
// the converters (llama2.c, PyTorch, Hugging Face), the trainer and the block
// builder (engine/models/llama_block.h) all go through this file.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arch/metadata_view.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::arch {

inline constexpr std::string_view kLlama = "llama";

// The key order of the converter that wrote a file (files come out byte for
// byte like llama.cpp's when the order matches).
enum class LlamaKeyOrder {
    HfConverter,      // convert_hf_to_gguf.py
    Llama2cConverter, // convert-llama2c-to-ggml (stories260K.gguf)
};

// rope.scaling.*: how positions past the trained context are reached.
struct RopeScaling {
    enum class Type { None, Linear, Yarn };
    Type type = Type::None;
    float factor = 1.0f;         // rope.scaling.factor: angles are divided by it
    int64_t original_context = 0;  // rope.scaling.original_context_length (YaRN; n_ctx_train when absent)
    float attn_factor = 1.0f;    // rope.scaling.attn_factor
    bool finetuned = false;      // rope.scaling.finetuned (informational)
};

// The hyper-parameters of llama and of the architectures llama.cpp builds
// with the same block and tensors (their keys under their own name).
struct LlamaParams {
    std::string arch = std::string(kLlama);  // general.architecture: the keys' prefix
    std::string name;      // general.name
    int64_t n_vocab = 0;   // columns of token_embd.weight (llama.cpp stores no key for it)
    int64_t n_ctx_train = 0;
    int64_t dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t ffn_dim = 0;
    int64_t n_rot = 0;     // rotated dimensions of a head (the head when absent)
    int64_t key_length = 0;  // attention.key_length (= value_length): a head's size when not dim / n_heads
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;
    RopeScaling rope_scaling;
    // Attention q/k/v projections have biases (qwen2). Without it they, and the
    // output and FFN biases, are optional tensors (as llama.cpp's llama).
    bool qkv_bias = false;

    int64_t head_dim() const noexcept { return key_length != 0 ? key_length : dim / n_heads; }
    int64_t q_dim() const noexcept { return n_heads * head_dim(); }
    int64_t kv_dim() const noexcept { return n_kv_heads * head_dim(); }

    // Reads and checks the hyper-parameters of a file whose general.architecture
    // is `architecture` (llama, or one of its family: the same keys under its
    // name); n_vocab from token_embd.weight. kiln::Error("model") naming what is
    // wrong, and naming any "<architecture>.*" key that is neither llama's nor
    // in `more_keys` (the family member's own).
    static LlamaParams read(const MetadataView& f, std::string_view architecture = kLlama,
                            std::initializer_list<std::string_view> more_keys = {});
    static LlamaParams read(const GgufFile& f, std::string_view architecture = kLlama,
                            std::initializer_list<std::string_view> more_keys = {}) {
        return read(FileMetadata(f), architecture, more_keys);
    }
    // "<arch>.<suffix>": the metadata key of this architecture.
    std::string key(std::string_view suffix) const;
    // Checks sizes that must fit each other; where starts messages.
    void validate(const std::string& where) const;
    // general.architecture, general.name and the llama.* keys, as llama.cpp writes them
    // (integers u32, floats f32; rope.freq_base only when not llama.cpp's default).
    std::vector<GgufEntry> metadata(LlamaKeyOrder order = LlamaKeyOrder::HfConverter) const;
};

template <typename T>
struct LlamaLayerTensors {
    T attn_q, attn_k, attn_v, attn_output, attn_norm, ffn_gate, ffn_down, ffn_up, ffn_norm;
};

// A layer's members in file order, to walk two bindings (say GGUF and Hugging
// Face names) side by side.
template <typename T>
inline constexpr T LlamaLayerTensors<T>::*kLlamaLayerMembers[] = {
    &LlamaLayerTensors<T>::attn_q,    &LlamaLayerTensors<T>::attn_k,   &LlamaLayerTensors<T>::attn_v,
    &LlamaLayerTensors<T>::attn_output, &LlamaLayerTensors<T>::attn_norm, &LlamaLayerTensors<T>::ffn_gate,
    &LlamaLayerTensors<T>::ffn_down,  &LlamaLayerTensors<T>::ffn_up,   &LlamaLayerTensors<T>::ffn_norm,
};

// The optional tensors of a layer: biases (q/k/v required when params.qkv_bias).
template <typename T>
struct LlamaLayerBiases {
    T attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_down, ffn_up;
};

template <typename T>
struct LlamaTensors {
    T rope_freqs;  // optional: per-frequency factors the angles are divided by (Llama 3.1)
    T token_embd, output_norm, output;  // output: optional (a head tied to token_embd)
    std::vector<LlamaLayerTensors<T>> layers;
    std::vector<LlamaLayerBiases<T>> biases;
};

// Calls get(spec) for every tensor of the model, in llama.cpp's file order, and
// keeps what it returns: T is whatever the caller binds a tensor to (a file's
// tensor, a graph node, a converter's source).
template <typename T, typename Get>
LlamaTensors<T> llama_tensors(const LlamaParams& p, Get&& get) {
    const auto d = static_cast<uint64_t>(p.dim), ffn = static_cast<uint64_t>(p.ffn_dim),
               kv = static_cast<uint64_t>(p.kv_dim()), vocab = static_cast<uint64_t>(p.n_vocab);
    using R = TensorRole;
    const auto q = static_cast<uint64_t>(p.q_dim());
    LlamaTensors<T> t;
    t.rope_freqs = get(TensorSpec{"rope_freqs.weight", {static_cast<uint64_t>(p.n_rot / 2)}, R::Norm, true});
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.output_norm = get(TensorSpec{"output_norm.weight", {d}, R::Norm});
    t.output = get(TensorSpec{"output.weight", {d, vocab}, R::Matrix, true});
    for (int64_t i = 0; i < p.n_layers; ++i) {
        const auto spec = [i](std::string_view suffix, std::vector<uint64_t> dims, R role) {
            return TensorSpec{block_tensor(i, suffix), std::move(dims), role};
        };
        LlamaLayerTensors<T> l;
        l.attn_q = get(spec("attn_q.weight", {d, q}, R::Matrix));
        l.attn_k = get(spec("attn_k.weight", {d, kv}, R::Matrix));
        l.attn_v = get(spec("attn_v.weight", {d, kv}, R::Matrix));
        l.attn_output = get(spec("attn_output.weight", {q, d}, R::Matrix));
        l.attn_norm = get(spec("attn_norm.weight", {d}, R::Norm));
        l.ffn_gate = get(spec("ffn_gate.weight", {d, ffn}, R::Matrix));
        l.ffn_down = get(spec("ffn_down.weight", {ffn, d}, R::Matrix));
        l.ffn_up = get(spec("ffn_up.weight", {d, ffn}, R::Matrix));
        l.ffn_norm = get(spec("ffn_norm.weight", {d}, R::Norm));
        t.layers.push_back(std::move(l));
        const auto bias = [&](std::string_view suffix, uint64_t n, bool optional) {
            return get(TensorSpec{block_tensor(i, suffix), {n}, R::Bias, optional});
        };
        LlamaLayerBiases<T> b;
        b.attn_q = bias("attn_q.bias", q, !p.qkv_bias);
        b.attn_k = bias("attn_k.bias", kv, !p.qkv_bias);
        b.attn_v = bias("attn_v.bias", kv, !p.qkv_bias);
        b.attn_output = bias("attn_output.bias", d, true);
        b.ffn_gate = bias("ffn_gate.bias", ffn, true);
        b.ffn_down = bias("ffn_down.bias", d, true);
        b.ffn_up = bias("ffn_up.bias", ffn, true);
        t.biases.push_back(std::move(b));
    }
    return t;
}

// Every tensor's spec, in file order.
std::vector<TensorSpec> llama_tensor_specs(const LlamaParams& p);
// Every tensor's name (what a converter writes its source tensors as).
LlamaTensors<std::string> llama_tensor_names(const LlamaParams& p);

}  // namespace kiln::arch
