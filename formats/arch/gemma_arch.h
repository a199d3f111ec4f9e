#pragma once
// The `gemma` and `gemma2` architectures (llama.cpp's LLM_ARCH_GEMMA and
// LLM_ARCH_GEMMA2): llama's keys under their own name and llama's tensors
// less the output matrix (the head is always the token embedding), with
// Gemma's block: embeddings scaled by sqrt(width), NEOX rope, a GELU(tanh)
// gated FFN. Gemma 2 adds norms after attention and after the FFN
// (post_attention_norm, post_ffw_norm), soft-capped attention scores and
// logits, and a sliding window on every other layer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"
#include "formats/arch/tensor_spec.h"

namespace kiln::arch {

inline constexpr std::string_view kGemma = "gemma";
inline constexpr std::string_view kGemma2 = "gemma2";

struct GemmaParams {
    LlamaParams llama;         // llama's keys, under "gemma." or "gemma2."
    bool gemma2 = false;       // general.architecture is gemma2
    // Gemma 2 only (zero for gemma):
    int64_t sliding_window = 0;        // attention.sliding_window (llama.cpp's default 4096)
    float attn_softcap = 0.0f;         // attn_logit_softcapping (default 50)
    float final_softcap = 0.0f;        // final_logit_softcapping (default 30)
    // The attention scores' scale. Gemma 2 files do not store it (Hugging
    // Face's query_pre_attn_scalar); llama.cpp picks it by the layer count of
    // the released sizes: 1/sqrt(head size) for 26 and 42 layers (2B, 9B),
    // 1/sqrt(width / heads) for 46 (27B). Other counts load only where the two
    // agree; otherwise the file is refused rather than guessed.
    float query_scale = 0.0f;

    // Reads and checks a gemma or gemma2 file's hyper-parameters.
    static GemmaParams read(const MetadataView& f);
    static GemmaParams read(const GgufFile& f) { return read(FileMetadata(f)); }
    // Whether layer `i` attends through the sliding window (Gemma 2's even layers).
    bool windowed(int64_t i) const noexcept { return gemma2 && i % 2 == 0; }
};

template <typename T>
struct GemmaLayerTensors {
    T attn_norm, attn_q, attn_k, attn_v, attn_output, post_attention_norm;
    T ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;  // the post norms: Gemma 2 only
};

template <typename T>
struct GemmaTensors {
    T token_embd, output_norm;  // the head is token_embd
    std::vector<GemmaLayerTensors<T>> layers;
};

// Calls get(spec) for every tensor, in llama.cpp's file order (see
// llama_tensors); the tensors gemma lacks are `absent`.
template <typename T, typename Get>
GemmaTensors<T> gemma_tensors(const GemmaParams& p, Get&& get, T absent = T{}) {
    const LlamaParams& l = p.llama;
    const auto d = static_cast<uint64_t>(l.dim), ffn = static_cast<uint64_t>(l.ffn_dim),
               kv = static_cast<uint64_t>(l.kv_dim()), q = static_cast<uint64_t>(l.q_dim()),
               vocab = static_cast<uint64_t>(l.n_vocab);
    using R = TensorRole;
    GemmaTensors<T> t;
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.output_norm = get(TensorSpec{"output_norm.weight", {d}, R::Norm});
    for (int64_t i = 0; i < l.n_layers; ++i) {
        const auto spec = [i](std::string_view suffix, std::vector<uint64_t> dims, R role) {
            return TensorSpec{block_tensor(i, suffix), std::move(dims), role};
        };
        GemmaLayerTensors<T> x;
        x.attn_norm = get(spec("attn_norm.weight", {d}, R::Norm));
        x.attn_q = get(spec("attn_q.weight", {d, q}, R::Matrix));
        x.attn_k = get(spec("attn_k.weight", {d, kv}, R::Matrix));
        x.attn_v = get(spec("attn_v.weight", {d, kv}, R::Matrix));
        x.attn_output = get(spec("attn_output.weight", {q, d}, R::Matrix));
        x.post_attention_norm = p.gemma2 ? get(spec("post_attention_norm.weight", {d}, R::Norm)) : absent;
        x.ffn_norm = get(spec("ffn_norm.weight", {d}, R::Norm));
        x.ffn_gate = get(spec("ffn_gate.weight", {d, ffn}, R::Matrix));
        x.ffn_up = get(spec("ffn_up.weight", {d, ffn}, R::Matrix));
        x.ffn_down = get(spec("ffn_down.weight", {ffn, d}, R::Matrix));
        x.post_ffw_norm = p.gemma2 ? get(spec("post_ffw_norm.weight", {d}, R::Norm)) : absent;
        t.layers.push_back(std::move(x));
    }
    return t;
}

std::vector<TensorSpec> gemma_tensor_specs(const GemmaParams& p);

}  // namespace kiln::arch
