#pragma once
// The gpt2 architecture as a decoder: its descriptor (formats/arch/gpt2_arch.h)
// checked against a file, and its block builder (gpt2_block.h) over the
// file's weights. The small character-level GPTs of nanoGPT-style tutorials
// are the same shape; their biases may be absent.
#include <memory>

#include "engine/models/decoder.h"
#include "formats/arch/gpt2_arch.h"

namespace kiln {

// Checks the hyper-parameters and every tensor's presence, type and shape.
std::unique_ptr<DecoderArch> load_gpt2_decoder(const GgufFile& file);

// The hyper-parameters of a loaded gpt2 decoder (kiln::Error for another architecture).
const arch::Gpt2Params& gpt2_params(const DecoderArch& decoder);

}  // namespace kiln
