#pragma once
// What a user gave where a GGUF file belongs, when it is something else that
// kiln-convert reads: a Hugging Face folder, a .safetensors, PyTorch or llama2.c
// checkpoint. GgufFile::open then refuses with a message that points at the
// converter, instead of a byte-level "not a GGUF file".
#include <cstddef>
#include <filesystem>
#include <span>

namespace kiln {

// Throws kiln::Error("gguf", "... is a folder, not a GGUF file: convert it
// first: kiln-convert PATH -o model.gguf") for a folder; does nothing otherwise.
void refuse_folder_as_gguf(const std::filesystem::path& path);

// Throws the same kind of error when `bytes` (the file's content) do not start
// with GGUF's magic and the file is a checkpoint kiln-convert reads (by its
// extension, or a zip or safetensors header); does nothing otherwise.
void refuse_checkpoint_as_gguf(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace kiln
