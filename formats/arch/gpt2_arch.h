#pragma once
// The `gpt2` architecture's GGUF schema, in one place: hyper-parameters
// (llama.cpp's gpt2.* keys) and tensors (names, shapes, roles, in the order
// llama.cpp's converter writes them; docs/architectures.md, gpt2). Used by the
// loader, the converters (nanoGPT, Hugging Face), the GPT trainer and the block
// builder (engine/models/gpt2_block.h).
//
// Every bias is optional (nanoGPT's bias=False: absent = zero, a kiln extension
// of llama.cpp's layout); output.weight is optional too (a head tied to the
// token embedding).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arch/metadata_view.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::arch {

inline constexpr std::string_view kGpt2 = "gpt2";

struct Gpt2Params {
    std::string name;      // general.name
    int64_t n_vocab = 0;   // columns of token_embd.weight
    int64_t n_ctx_train = 0;  // rows of the position embedding
    int64_t dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t ffn_dim = 0;
    float norm_eps = 1e-5f;

    int64_t head_dim() const noexcept { return dim / n_heads; }

    // Reads and checks the hyper-parameters of a gpt2 file; n_vocab from token_embd.weight.
    static Gpt2Params read(const MetadataView& f);
    static Gpt2Params read(const GgufFile& f) { return read(FileMetadata(f)); }
    // general.architecture, general.name and the gpt2.* keys as llama.cpp writes them.
    std::vector<GgufEntry> metadata() const;
};

// A LayerNorm or a linear layer: its weight and its (optional) bias.
template <typename T>
struct Affine {
    T weight, bias;
};

template <typename T>
struct Gpt2LayerTensors {
    Affine<T> attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down;  // attn_qkv: rows Q, K, V
};

template <typename T>
struct Gpt2Tensors {
    T token_embd, position_embd;
    std::vector<Gpt2LayerTensors<T>> layers;
    Affine<T> output_norm;
    T output;  // optional: a head tied to token_embd
};

// Calls get(spec) for every tensor, in llama.cpp's file order, and keeps the results.
template <typename T, typename Get>
Gpt2Tensors<T> gpt2_tensors(const Gpt2Params& p, Get&& get) {
    const auto d = static_cast<uint64_t>(p.dim), f = static_cast<uint64_t>(p.ffn_dim),
               vocab = static_cast<uint64_t>(p.n_vocab), ctx = static_cast<uint64_t>(p.n_ctx_train);
    using R = TensorRole;
    // A norm (f32 weight and bias) or a linear layer (matrix [in, out], bias [out]).
    const auto affine = [&](const std::string& prefix, std::vector<uint64_t> dims, bool linear) {
        const uint64_t out = dims.back();
        Affine<T> a;
        a.weight = get(TensorSpec{prefix + ".weight", std::move(dims), linear ? R::Matrix : R::Norm});
        a.bias = get(TensorSpec{prefix + ".bias", {out}, linear ? R::Bias : R::Norm, true});
        return a;
    };
    Gpt2Tensors<T> t;
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.position_embd = get(TensorSpec{"position_embd.weight", {d, ctx}, R::Table});
    for (int64_t i = 0; i < p.n_layers; ++i) {
        const auto name = [i](std::string_view part) { return block_tensor(i, part); };
        Gpt2LayerTensors<T> l;
        l.attn_norm = affine(name("attn_norm"), {d}, false);
        l.attn_qkv = affine(name("attn_qkv"), {d, 3 * d}, true);
        l.attn_output = affine(name("attn_output"), {d, d}, true);
        l.ffn_norm = affine(name("ffn_norm"), {d}, false);
        l.ffn_up = affine(name("ffn_up"), {d, f}, true);
        l.ffn_down = affine(name("ffn_down"), {f, d}, true);
        t.layers.push_back(std::move(l));
    }
    t.output_norm = affine("output_norm", {d}, false);
    t.output = get(TensorSpec{"output.weight", {d, vocab}, R::Matrix, true});
    return t;
}

// Every tensor's spec, in file order.
std::vector<TensorSpec> gpt2_tensor_specs(const Gpt2Params& p);

}  // namespace kiln::arch
