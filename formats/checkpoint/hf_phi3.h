#pragma once
// A Hugging Face Phi3ForCausalLM folder (Phi-3, Phi-3.5, Phi-4) as a
// kiln::Checkpoint in llama.cpp's `phi3` layout, as convert_hf_to_gguf.py's
// Phi3MiniModel writes it:
//
//   model.embed_tokens.weight                 token_embd.weight
//   model.layers.N.input_layernorm.weight     blk.N.attn_norm.weight
//   model.layers.N.self_attn.qkv_proj.weight  blk.N.attn_qkv.weight   (q rows, k rows, v rows)
//   model.layers.N.self_attn.o_proj.weight    blk.N.attn_output.weight
//   model.layers.N.post_attention_layernorm.weight  blk.N.ffn_norm.weight
//   model.layers.N.mlp.gate_up_proj.weight    blk.N.ffn_up.weight     (gate rows, then up)
//   model.layers.N.mlp.down_proj.weight       blk.N.ffn_down.weight
//   model.norm.weight                         output_norm.weight
//   lm_head.weight                            output.weight
//
// every one a view of the safetensors mapping (no permutation: both rotate
// halves). rope_scaling of type "longrope" (or the older "su") becomes
// rope_factors_long.weight / rope_factors_short.weight (F32, head/2 each) and
// phi3.rope.scaling.attn_factor = sqrt(1 + ln(s) / ln(original)) with s =
// max_position_embeddings / original_max_position_embeddings (1 when s <= 1);
// any other type is refused. Keys as the converter writes them, among them
// phi3.rope.scaling.original_context_length, phi3.rope.freq_base (always) and
// phi3.attention.sliding_window (config's sliding_window, null -> 0).
// tie_word_embeddings (Phi-4-mini): output.weight is written as a second view
// of the embedding, since kiln's phi3 needs the matrix.
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

Checkpoint hf_phi3_checkpoint(const std::filesystem::path& folder);

}  // namespace kiln
