#pragma once
// Hugging Face GemmaForCausalLM and Gemma2ForCausalLM folders as a
// kiln::Checkpoint in llama.cpp's `gemma` / `gemma2` layout, as
// convert_hf_to_gguf.py's GemmaModel and Gemma2Model write it:
//
//   model.embed_tokens.weight                 token_embd.weight (also the head; lm_head.weight is dropped)
//   model.norm.weight                         output_norm.weight               (+1)
//   model.layers.N.input_layernorm.weight     blk.N.attn_norm.weight           (+1)
//   model.layers.N.self_attn.{q,k,v,o}_proj   blk.N.attn_{q,k,v,output}.weight (not permuted: NEOX rope)
//   gemma:  post_attention_layernorm          blk.N.ffn_norm.weight            (+1)
//   gemma2: post_attention_layernorm          blk.N.post_attention_norm.weight (+1)
//           pre_feedforward_layernorm         blk.N.ffn_norm.weight            (+1)
//           post_feedforward_layernorm        blk.N.post_ffw_norm.weight       (+1)
//   model.layers.N.mlp.{gate,up,down}_proj    blk.N.ffn_{gate,up,down}.weight
//
// Gemma's RMSNorm multiplies by (1 + weight); the file stores weight + 1 (F32,
// computed as the converter's torch code does: in F16 for F16 weights), so
// the norms are owned; every other tensor is a view of the mapping.
// Metadata: llama's keys under the architecture's name, key_length and
// value_length from head_dim (always, as the converter writes them), and for
// gemma2 attn_logit_softcapping, final_logit_softcapping and
// attention.sliding_window. Gemma 2's query_pre_attn_scalar is not stored in
// GGUF: kiln (as llama.cpp) derives the query scale from the layer count
// (arch::GemmaParams), so a config whose scalar differs from that is refused,
// naming it. rope_scaling is refused.
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

Checkpoint hf_gemma_checkpoint(const std::filesystem::path& folder);

}  // namespace kiln
