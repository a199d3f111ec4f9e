#pragma once
// kiln-convert's export: a llama GGUF (or any input kiln-convert reads) as a
// Hugging Face LlamaForCausalLM folder (config.json + model.safetensors), so a
// model made or converted in kiln can go on in PyTorch.
#include <cstdio>
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln::convert {

// Writes `folder`/config.json and `folder`/model.safetensors (the folder is
// created if missing; its parent must exist). F32/F16/BF16 tensors keep their
// type, bytes for bytes; quantized tensors are written as F32 (dequantized).
void export_hf_llama(const Checkpoint& checkpoint, const std::filesystem::path& folder, std::FILE* log);

}  // namespace kiln::convert
