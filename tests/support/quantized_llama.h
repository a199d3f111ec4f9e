#pragma once
// A small Llama whose matrices are quantized as in a Q4_K_M file, for tests of
// what the kernels rearrange (interleaved layouts) and where weights live.
#include <filesystem>

namespace kiln::test {

// Writes dir/q4_k_llama.gguf: dim 256, FFN 512, 2 layers, 4 heads / 2 KV
// heads, vocabulary 256, random weights (seed 42); the head and the FFN's down
// projections Q6_K, the other matrices Q4_K, the norms F32. Every matrix's
// rows are whole super-blocks and whole groups of 16 rows. Returns the path.
std::filesystem::path write_q4_k_llama(const std::filesystem::path& dir);

}  // namespace kiln::test
