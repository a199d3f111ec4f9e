#pragma once
// A model read from some checkpoint format, already expressed the GGUF way:
// llama.cpp tensor names and shapes, and the GGUF metadata (architecture
// hyper-parameters and tokenizer) that describe it. Readers for llama2.c,
// PyTorch and safetensors produce one; kiln-convert writes it as GGUF.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

struct CheckpointTensor {
    std::string name;              // llama.cpp's name, e.g. "blk.0.attn_q.weight"
    DType type = DType::F32;       // storage type of `data`
    std::vector<uint64_t> dims;    // ggml order: dims[0] is the row length
    std::span<const std::byte> data;  // rows packed; inside the source mapping or Checkpoint::owned
};

struct Checkpoint {
    std::vector<GgufEntry> metadata;        // general.architecture first, then <arch>.* and tokenizer.ggml.*
    std::vector<CheckpointTensor> tensors;  // in the order they should be written
    // Buffers holding converted data (transposed, permuted, cast) that tensors point into.
    std::vector<std::vector<std::byte>> owned;
    // Keeps the source (e.g. a file mapping) alive as long as tensors point into it.
    std::shared_ptr<const void> source;

    // Adds an owned buffer and returns a view of it.
    std::span<const std::byte> own(std::vector<std::byte> bytes) {
        owned.push_back(std::move(bytes));
        return owned.back();
    }
};

}  // namespace kiln
