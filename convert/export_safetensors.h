#pragma once
// kiln-convert's export: a GGUF (or any input kiln-convert reads) of the
// llama, qwen2, phi3, gemma, gemma2 or gpt2 architecture as a Hugging Face folder
// (config.json + model.safetensors) that kiln-convert's HF readers
// (formats/checkpoint/hf_*.h) turn back into the same GGUF, so a model made or
// converted in kiln can go on in PyTorch:
//   llama  -> LlamaForCausalLM: q/k (and their biases) back to HF's rotate-half
//             rows; key_length -> head_dim; biases -> attention_bias/mlp_bias;
//             rope.scaling linear/yarn -> rope_scaling; rope_freqs.weight ->
//             rope_scaling llama3 when Llama 3's rule (low 1, high 4) with some
//             factor and original context reproduces the table (within 1e-6)
//   qwen2  -> Qwen2ForCausalLM (nothing permuted)
//   phi3   -> Phi3ForCausalLM: rope_factors_long/short -> rope_scaling longrope,
//             sliding_window 0 -> null
//   gemma, gemma2 -> GemmaForCausalLM / Gemma2ForCausalLM: norms less 1 (F32),
//             query_pre_attn_scalar as kiln's gemma2 scales queries
//   gpt2   -> GPT2LMHeadModel: the four Conv1D matrices per layer transposed
//             to (in, out); output.weight equal to (or absent beside) the token
//             embedding = tied; absent biases written as zeros (noted)
// The vocabulary goes with the weights (formats/checkpoint/hf_tokenizer_writer.h):
// tokenizer.model or tokenizer.json, tokenizer_config.json, and its special
// ids in config.json and generation_config.json; a char vocabulary is left
// out with a note on the log.
// What HF's class cannot express (say, q/k/v biases without an o bias in a
// llama) is refused by name: kiln::Error("convert", ...).
#include <cstdio>
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln::convert {

// Writes `folder`/config.json and `folder`/model.safetensors, and the
// vocabulary's files (the folder is created if missing; its parent must exist). F32/F16/BF16 tensors keep their
// type, bytes for bytes (Gemma's norms: F32 less 1); quantized tensors are
// written as F32 (dequantized).
void export_hf_folder(const Checkpoint& checkpoint, const std::filesystem::path& folder, std::FILE* log);

}  // namespace kiln::convert
