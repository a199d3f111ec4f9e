#pragma once
// The llama architecture as a decoder: its descriptor (formats/arch/llama_arch.h)
// checked against a file, and its block builder (llama_block.h) over the
// file's weights.
#include <memory>

#include "engine/models/decoder.h"
#include "formats/arch/llama_arch.h"

namespace kiln {

// Checks the hyper-parameters and every tensor's presence, type and shape;
// kiln::Error("model") naming what is wrong.
std::unique_ptr<DecoderArch> load_llama_decoder(const GgufFile& file);

// The hyper-parameters of a loaded llama decoder (kiln::Error for another architecture).
const arch::LlamaParams& llama_params(const DecoderArch& decoder);

}  // namespace kiln
