#pragma once
// A GGUF file seen as a Checkpoint: its metadata and tensors, zero-copy, so
// that kiln-convert can re-quantize GGUF files like any other input.
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

Checkpoint read_gguf_checkpoint(const std::filesystem::path& path);

}  // namespace kiln
