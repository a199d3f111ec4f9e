#pragma once
// A Hugging Face Qwen2ForCausalLM folder (Qwen2, Qwen2.5) as a kiln::Checkpoint
// in llama.cpp's `qwen2` layout, as convert_hf_to_gguf.py's Qwen2Model writes
// it: llama's tensor names (hf_llama.h's table) plus the required q/k/v
// biases (self_attn.{q,k,v}_proj.bias -> blk.N.attn_{q,k,v}.bias). Qwen2's
// RoPE rotates halves in both Hugging Face and llama.cpp (NEOX), so no tensor
// is permuted: every tensor is a view of the safetensors mapping.
// tie_word_embeddings leaves output.weight out. Metadata: llama's keys under
// "qwen2." (no rope.dimension_count, as the converter writes none);
// rope_scaling "yarn" (and "linear") become qwen2.rope.scaling.*, any other
// type is refused. use_sliding_window true is refused (llama.cpp's qwen2 has
// no window; its converter would silently drop it).
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

Checkpoint hf_qwen2_checkpoint(const std::filesystem::path& folder);

}  // namespace kiln
