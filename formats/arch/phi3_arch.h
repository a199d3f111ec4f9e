#pragma once
// The `phi3` architecture (Phi-3, Phi-3.5, Phi-4; llama.cpp's LLM_ARCH_PHI3):
// llama's keys under "phi3." with a fused q/k/v matrix (attn_qkv: q rows, then
// k, then v) and a fused gate/up matrix (ffn_up: gate rows, then up), NEOX
// rope, an untied head, a sliding window on every layer (attention.sliding_window;
// 0 for none, as Phi-4's files say), and LongRoPE's per-frequency factors
// (rope_factors_long / rope_factors_short, picked by the session's context
// against rope.scaling.original_context_length, as llama.cpp picks them).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"
#include "formats/arch/tensor_spec.h"

namespace kiln::arch {

inline constexpr std::string_view kPhi3 = "phi3";

struct Phi3Params {
    LlamaParams llama;           // llama's keys, under "phi3."
    int64_t sliding_window = 0;  // 0: none

    // Reads and checks a phi3 file. Without attention.sliding_window the
    // window is llama.cpp's for the released sizes it recognises (Phi-3 mini
    // and medium 4k: 2047; mini 128k: 262144; medium 128k: 131072); any other
    // file without the key is refused, as llama.cpp refuses it.
    static Phi3Params read(const MetadataView& f);
    static Phi3Params read(const GgufFile& f) { return read(FileMetadata(f)); }
};

template <typename T>
struct Phi3LayerTensors {
    T attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down;  // ffn_up: gate and up, 2 x ffn_dim rows
};

template <typename T>
struct Phi3Tensors {
    T token_embd, output_norm, output;
    T rope_factors_long, rope_factors_short;  // optional, both or neither
    std::vector<Phi3LayerTensors<T>> layers;
};

// Calls get(spec) for every tensor, in the order llama.cpp's converter writes them.
template <typename T, typename Get>
Phi3Tensors<T> phi3_tensors(const Phi3Params& p, Get&& get) {
    const LlamaParams& l = p.llama;
    const auto d = static_cast<uint64_t>(l.dim), ffn = static_cast<uint64_t>(l.ffn_dim),
               kv = static_cast<uint64_t>(l.kv_dim()), vocab = static_cast<uint64_t>(l.n_vocab),
               half_rot = static_cast<uint64_t>(l.n_rot / 2);
    using R = TensorRole;
    Phi3Tensors<T> t;
    t.token_embd = get(TensorSpec{std::string(kTokenEmbedding), {d, vocab}, R::Table});
    t.rope_factors_long = get(TensorSpec{"rope_factors_long.weight", {half_rot}, R::Norm, true});
    t.rope_factors_short = get(TensorSpec{"rope_factors_short.weight", {half_rot}, R::Norm, true});
    for (int64_t i = 0; i < l.n_layers; ++i) {
        const auto spec = [i](std::string_view suffix, std::vector<uint64_t> dims, R role) {
            return TensorSpec{block_tensor(i, suffix), std::move(dims), role};
        };
        Phi3LayerTensors<T> x;
        x.attn_norm = get(spec("attn_norm.weight", {d}, R::Norm));
        x.attn_qkv = get(spec("attn_qkv.weight", {d, d + 2 * kv}, R::Matrix));
        x.attn_output = get(spec("attn_output.weight", {d, d}, R::Matrix));
        x.ffn_norm = get(spec("ffn_norm.weight", {d}, R::Norm));
        x.ffn_up = get(spec("ffn_up.weight", {d, 2 * ffn}, R::Matrix));
        x.ffn_down = get(spec("ffn_down.weight", {ffn, d}, R::Matrix));
        t.layers.push_back(std::move(x));
    }
    t.output_norm = get(TensorSpec{"output_norm.weight", {d}, R::Norm});
    t.output = get(TensorSpec{"output.weight", {d, vocab}, R::Matrix});
    return t;
}

std::vector<TensorSpec> phi3_tensor_specs(const Phi3Params& p);

}  // namespace kiln::arch
