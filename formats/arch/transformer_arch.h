#pragma once
// The encoder-decoder `transformer` architecture's GGUF schema (kiln's own
// architecture, in llama.cpp's style; docs/architectures.md): hyper-parameters
// (transformer.* keys) and tensors (enc.* and dec.* blocks). The loader, the
// torch.nn.Transformer converter, the trainer and the block builder
// (engine/models/transformer_block.h) go through this file.
//
// Optional: every bias; the decoder's own embedding dec.token_embd (absent:
// one table shared with the encoder); output.weight (absent: tied to the
// decoder's embedding); the final norms of the encoder and decoder stacks.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arch/gpt2_arch.h"  // Affine
#include "formats/arch/metadata_view.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::arch {

inline constexpr std::string_view kTransformer = "transformer";

struct TransformerParams {
    enum class Activation { Relu, Gelu };

    std::string name;     // general.name
    int64_t n_vocab = 0;  // columns of token_embd.weight
    int64_t n_ctx = 0;    // longest source, and longest target
    int64_t dim = 0;
    int64_t n_encoder_layers = 0;
    int64_t n_decoder_layers = 0;
    int64_t n_heads = 0;
    int64_t ffn_dim = 0;
    float norm_eps = 1e-5f;
    bool norm_first = false;  // pre-LN; false: post-LN (the paper)
    Activation activation = Activation::Relu;

    int64_t head_dim() const noexcept { return dim / n_heads; }

    // Reads and checks the hyper-parameters of a transformer file; n_vocab from token_embd.weight.
    static TransformerParams read(const MetadataView& f);
    static TransformerParams read(const GgufFile& f) { return read(FileMetadata(f)); }
    // general.architecture, general.name and the transformer.* keys.
    std::vector<GgufEntry> metadata() const;
};

template <typename T>
struct AttentionTensors {
    Affine<T> q, k, v, o;
};

template <typename T>
struct EncoderLayerTensors {
    AttentionTensors<T> attn;
    Affine<T> attn_norm, ffn_up, ffn_down, ffn_norm;
};

template <typename T>
struct DecoderLayerTensors {
    AttentionTensors<T> attn;
    Affine<T> attn_norm;
    AttentionTensors<T> cross_attn;
    Affine<T> cross_attn_norm, ffn_up, ffn_down, ffn_norm;
};

template <typename T>
struct TransformerTensors {
    T token_embd, dec_token_embd;  // dec_token_embd optional
    std::vector<EncoderLayerTensors<T>> encoder;
    Affine<T> enc_output_norm;  // optional
    std::vector<DecoderLayerTensors<T>> decoder;
    Affine<T> dec_output_norm;  // optional
    Affine<T> output;           // weight optional (tied), bias optional
};

// Calls get(spec) for every tensor, in the order kiln-train writes them, and keeps the results.
template <typename T, typename Get>
TransformerTensors<T> transformer_tensors(const TransformerParams& p, Get&& get) {
    const auto d = static_cast<uint64_t>(p.dim), f = static_cast<uint64_t>(p.ffn_dim),
               vocab = static_cast<uint64_t>(p.n_vocab);
    using R = TensorRole;
    const auto affine = [&](const std::string& prefix, std::vector<uint64_t> dims, bool linear, bool optional = false) {
        const uint64_t out = dims.back();
        Affine<T> a;
        a.weight = get(TensorSpec{prefix + ".weight", std::move(dims), linear ? R::Matrix : R::Norm, optional});
        a.bias = get(TensorSpec{prefix + ".bias", {out}, linear ? R::Bias : R::Norm, true});
        return a;
    };
    const auto attention = [&](const std::string& prefix) {
        AttentionTensors<T> a;
        a.q = affine(prefix + "_q", {d, d}, true);
        a.k = affine(prefix + "_k", {d, d}, true);
        a.v = affine(prefix + "_v", {d, d}, true);
        a.o = affine(prefix + "_o", {d, d}, true);
        return a;
    };
    TransformerTensors<T> t;
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.dec_token_embd = get(TensorSpec{"dec.token_embd.weight", {d, vocab}, R::Table, true});
    for (int64_t i = 0; i < p.n_encoder_layers; ++i) {
        const std::string b = "enc." + block_tensor(i, "");
        EncoderLayerTensors<T> l;
        l.attn = attention(b + "attn");
        l.attn_norm = affine(b + "attn_norm", {d}, false);
        l.ffn_up = affine(b + "ffn_up", {d, f}, true);
        l.ffn_down = affine(b + "ffn_down", {f, d}, true);
        l.ffn_norm = affine(b + "ffn_norm", {d}, false);
        t.encoder.push_back(std::move(l));
    }
    t.enc_output_norm = affine("enc.output_norm", {d}, false, true);
    for (int64_t i = 0; i < p.n_decoder_layers; ++i) {
        const std::string b = "dec." + block_tensor(i, "");
        DecoderLayerTensors<T> l;
        l.attn = attention(b + "attn");
        l.attn_norm = affine(b + "attn_norm", {d}, false);
        l.cross_attn = attention(b + "cross_attn");
        l.cross_attn_norm = affine(b + "cross_attn_norm", {d}, false);
        l.ffn_up = affine(b + "ffn_up", {d, f}, true);
        l.ffn_down = affine(b + "ffn_down", {f, d}, true);
        l.ffn_norm = affine(b + "ffn_norm", {d}, false);
        t.decoder.push_back(std::move(l));
    }
    t.dec_output_norm = affine("dec.output_norm", {d}, false, true);
    t.output = affine("output", {d, vocab}, true, true);
    return t;
}

// Every tensor's spec, in order; every tensor's name.
std::vector<TensorSpec> transformer_tensor_specs(const TransformerParams& p);
TransformerTensors<std::string> transformer_tensor_names(const TransformerParams& p);

}  // namespace kiln::arch
