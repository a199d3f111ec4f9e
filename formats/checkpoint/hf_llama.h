#pragma once
// Hugging Face LlamaForCausalLM and MistralForCausalLM folders (config.json
// plus model.safetensors, or shards listed by model.safetensors.index.json's
// "weight_map") as a kiln::Checkpoint in llama.cpp's `llama` layout, as
// convert_hf_to_gguf.py writes it; hf_qwen2.h reuses the machinery for qwen2.
//
//   HF name                                   llama.cpp name              ggml dims
//   model.embed_tokens.weight  (vocab, dim)   token_embd.weight           [dim, vocab]
//   model.norm.weight          (dim)          output_norm.weight          [dim]
//   lm_head.weight             (vocab, dim)   output.weight               [dim, vocab]
//   model.layers.N.self_attn.q_proj.weight    blk.N.attn_q.weight         [dim, n_heads*hd]   (un-permuted)
//   model.layers.N.self_attn.k_proj.weight    blk.N.attn_k.weight         [dim, n_kv_heads*hd] (un-permuted)
//   model.layers.N.self_attn.v_proj.weight    blk.N.attn_v.weight         [dim, n_kv_heads*hd]
//   model.layers.N.self_attn.o_proj.weight    blk.N.attn_output.weight    [n_heads*hd, dim]
//   model.layers.N.input_layernorm.weight     blk.N.attn_norm.weight      [dim]
//   model.layers.N.mlp.gate_proj.weight       blk.N.ffn_gate.weight       [dim, hidden]
//   model.layers.N.mlp.down_proj.weight       blk.N.ffn_down.weight       [hidden, dim]
//   model.layers.N.mlp.up_proj.weight         blk.N.ffn_up.weight         [dim, hidden]
//   model.layers.N.post_attention_layernorm.weight  blk.N.ffn_norm.weight [dim]
//   and with attention_bias, {q,k,v,o}_proj.bias -> attn_{q,k,v,output}.bias
//   (q and k un-permuted); with mlp_bias, {gate,up,down}_proj.bias -> ffn_*.bias.
//
// HF's RoPE rotates the two halves of each head (rotate_half), so its
// converter permuted q_proj/k_proj rows: within a head, Meta's row 2i+j became
// HF's row j*hd/2+i. llama.cpp's `llama` RoPE rotates adjacent pairs, so those
// tensors are permuted back (into Checkpoint::owned); every other tensor is a
// view of the safetensors mapping with its dtype kept (F32, F16, BF16). With
// tie_word_embeddings, output.weight is left out and llama.cpp uses
// token_embd.weight.
//
// config.json: head_dim (when not hidden_size / num_attention_heads) becomes
// llama.attention.key_length / value_length and rope.dimension_count;
// rope_scaling (rope_type, or type): "linear" and "yarn" become the
// llama.rope.scaling.* keys, "llama3" the rope_freqs.weight tensor (the
// factors convert_hf_to_gguf's LlamaModel computes from factor,
// low_freq_factor, high_freq_factor and original_max_position_embeddings);
// any other type is refused by name.
//
// Metadata as llama_state_dict.h writes it (general.architecture "llama",
// general.name = the folder's name, llama.* hyper-parameters, no tokenizer),
// plus llama.rope.freq_base when rope_theta is not llama.cpp's default 10000.
// Errors are kiln::Error("hf", ...): another architecture, an unknown
// rope_scaling, a missing or unknown tensor, or a shape that does not match
// config.json (both shapes named).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/arch/llama_arch.h"
#include "formats/checkpoint/checkpoint.h"

namespace kiln {

class HfConfig;

// LlamaForCausalLM or MistralForCausalLM.
Checkpoint hf_llama_checkpoint(const std::filesystem::path& folder);

// The llama-shaped architectures: their GGUF architecture and how they differ.
enum class HfLlamaKind { Llama, Qwen2 };
Checkpoint hf_llama_family_checkpoint(const HfConfig& config, HfLlamaKind kind);

// Llama 3.1's rope_freqs table (rope_scaling type "llama3"), computed in
// float32 as convert_hf_to_gguf's LlamaModel.generate_extra_tensors does.
std::vector<float> hf_llama3_rope_factors(double factor, double low_freq_factor, double high_freq_factor,
                                          double original_context, uint64_t head_dim, double rope_theta);

// The Hugging Face name of every tensor of a llama with n_layers layers (biases
// included), in the llama descriptor's structure (the import above and the
// safetensors export both map through it).
arch::LlamaTensors<std::string> hf_llama_names(int64_t n_layers);

}  // namespace kiln
