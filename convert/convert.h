#pragma once
// kiln-convert's conversion: any supported checkpoint in, one GGUF file out,
// with the quantization policy applied tensor by tensor.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace kiln::convert {

struct ConvertOptions {
    std::filesystem::path input;
    std::filesystem::path output;
    std::optional<DType> type;                      // --type; none: keep each tensor's type
    std::optional<std::filesystem::path> tokenizer; // --tokenizer (llama2.c tokenizer.bin)
    std::optional<std::string> name;                // --name: general.name
    bool to_safetensors = false;                    // --to safetensors: a Hugging Face folder instead of GGUF
};

// Converts and writes atomically; progress (on a terminal) and the summary go to `log`.
void convert(const ConvertOptions& options, std::FILE* log);

// The type a tensor is written as: 2-D weight matrices take the requested type;
// norms, biases and other 1-D tensors stay F32; a row length that is not a
// whole number of the target's blocks falls back to F16.
DType output_type(DType source, const std::vector<uint64_t>& dims, std::optional<DType> requested);

}  // namespace kiln::convert
