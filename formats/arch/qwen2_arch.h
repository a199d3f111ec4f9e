#pragma once
// The `qwen2` architecture (Qwen2, Qwen2.5; llama.cpp's LLM_ARCH_QWEN2):
// llama's keys under "qwen2." and llama's tensors, with required biases on
// the q, k and v projections and no others. Its rope rotates NEOX halves
// (the block builder's choice, engine/models/qwen2.cpp).
#include <string_view>

#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"

namespace kiln::arch {

inline constexpr std::string_view kQwen2 = "qwen2";

// Reads and checks a qwen2 file's hyper-parameters (qkv_bias set).
LlamaParams read_qwen2_params(const MetadataView& f);
inline LlamaParams read_qwen2_params(const GgufFile& f) { return read_qwen2_params(FileMetadata(f)); }

}  // namespace kiln::arch
