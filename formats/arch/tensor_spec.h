#pragma once
// One tensor of an architecture's GGUF schema: its llama.cpp name, its ggml
// dims (row length first), what the engine does with it, and whether a file
// may leave it out. Each architecture's descriptor (llama_arch.h, gpt2_arch.h)
// lists its tensors as TensorSpecs; no other file spells their names.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::arch {

enum class TensorRole {
    Matrix,  // multiplied with: any type the matmul kernels take
    Norm,    // a norm's weight or bias: f32
    Bias,    // a linear layer's bias: f32
    Table,   // embedding rows: any type that converts to float
};

struct TensorSpec {
    std::string name;
    std::vector<uint64_t> dims;
    TensorRole role = TensorRole::Matrix;
    // Absent means: a bias of zero, or (the output matrix) the head tied to the token embedding.
    bool optional = false;
};

// The token embedding's name in every llama.cpp architecture (kiln's transformer too).
inline constexpr std::string_view kTokenEmbedding = "token_embd.weight";

// "blk.<layer>.<suffix>": the name of a block's tensor in llama.cpp's files.
std::string block_tensor(int64_t layer, std::string_view suffix);

}  // namespace kiln::arch
