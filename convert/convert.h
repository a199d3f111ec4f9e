#pragma once
// kiln-convert's conversion: any supported checkpoint in, one GGUF file out,
// with the quantization policy applied tensor by tensor.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "convert/quant_mix.h"
#include "engine/core/dtype.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::convert {

struct ConvertOptions {
    std::filesystem::path input;
    std::filesystem::path output;
    std::optional<QuantMix> mix;                    // --type; none: keep each tensor's type
    std::optional<std::filesystem::path> tokenizer; // --tokenizer: a vocabulary file of any kind kiln reads
    bool no_tokenizer = false;                      // --no-tokenizer: write a model without a vocabulary
    std::optional<std::string> name;                // --name: general.name
    bool to_safetensors = false;                    // --to safetensors: a Hugging Face folder instead of GGUF
};

// Converts and writes atomically; progress (on a terminal) and the summary go to `log`.
void convert(const ConvertOptions& options, std::FILE* log);

// What llama-quantize's type rule needs to know of a model, from its metadata.
ModelFacts model_facts(const std::vector<GgufEntry>& metadata);

}  // namespace kiln::convert
