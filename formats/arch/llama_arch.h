#pragma once
// The `llama` architecture's GGUF schema, in one place: its hyper-parameters
// (read from and written to llama.cpp's metadata keys) and its tensors (names,
// shapes, roles, in the order llama.cpp's converters write them). The loader,
// the converters (llama2.c, PyTorch, Hugging Face), the trainer and the block
// builder (engine/models/llama_block.h) all go through this file.
#include <cstdint>
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
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;

    int64_t head_dim() const noexcept { return dim / n_heads; }
    int64_t kv_dim() const noexcept { return n_kv_heads * head_dim(); }

    // Reads and checks the hyper-parameters of a file whose general.architecture
    // is `architecture` (llama, or one of its family: the same keys under its
    // name); n_vocab from token_embd.weight. kiln::Error("model") naming what is wrong.
    static LlamaParams read(const MetadataView& f, std::string_view architecture = kLlama);
    static LlamaParams read(const GgufFile& f, std::string_view architecture = kLlama) {
        return read(FileMetadata(f), architecture);
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

template <typename T>
struct LlamaTensors {
    T token_embd, output_norm, output;  // output: optional (a head tied to token_embd)
    std::vector<LlamaLayerTensors<T>> layers;
};

// Calls get(spec) for every tensor of the model, in llama.cpp's file order, and
// keeps what it returns: T is whatever the caller binds a tensor to (a file's
// tensor, a graph node, a converter's source).
template <typename T, typename Get>
LlamaTensors<T> llama_tensors(const LlamaParams& p, Get&& get) {
    const auto d = static_cast<uint64_t>(p.dim), ffn = static_cast<uint64_t>(p.ffn_dim),
               kv = static_cast<uint64_t>(p.kv_dim()), vocab = static_cast<uint64_t>(p.n_vocab);
    using R = TensorRole;
    LlamaTensors<T> t;
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.output_norm = get(TensorSpec{"output_norm.weight", {d}, R::Norm});
    t.output = get(TensorSpec{"output.weight", {d, vocab}, R::Matrix, true});
    for (int64_t i = 0; i < p.n_layers; ++i) {
        const auto spec = [i](std::string_view suffix, std::vector<uint64_t> dims, R role) {
            return TensorSpec{block_tensor(i, suffix), std::move(dims), role};
        };
        LlamaLayerTensors<T> l;
        l.attn_q = get(spec("attn_q.weight", {d, d}, R::Matrix));
        l.attn_k = get(spec("attn_k.weight", {d, kv}, R::Matrix));
        l.attn_v = get(spec("attn_v.weight", {d, kv}, R::Matrix));
        l.attn_output = get(spec("attn_output.weight", {d, d}, R::Matrix));
        l.attn_norm = get(spec("attn_norm.weight", {d}, R::Norm));
        l.ffn_gate = get(spec("ffn_gate.weight", {d, ffn}, R::Matrix));
        l.ffn_down = get(spec("ffn_down.weight", {ffn, d}, R::Matrix));
        l.ffn_up = get(spec("ffn_up.weight", {d, ffn}, R::Matrix));
        l.ffn_norm = get(spec("ffn_norm.weight", {d}, R::Norm));
        t.layers.push_back(std::move(l));
    }
    return t;
}

// Every tensor's spec, in file order.
std::vector<TensorSpec> llama_tensor_specs(const LlamaParams& p);
// Every tensor's name (what a converter writes its source tensors as).
LlamaTensors<std::string> llama_tensor_names(const LlamaParams& p);

}  // namespace kiln::arch
