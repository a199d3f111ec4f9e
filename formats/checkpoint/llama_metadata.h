#pragma once
// The GGUF metadata of the `llama` architecture, in the order llama.cpp's
// converters write it, shared by the readers that build llama checkpoints.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf/gguf_file.h"

namespace kiln {

struct LlamaHyperParameters {
    std::string name;  // general.name
    uint64_t context_length = 0;
    uint64_t embedding_length = 0;
    uint64_t feed_forward_length = 0;
    uint64_t head_count = 0;
    uint64_t head_count_kv = 0;
    uint64_t block_count = 0;
    uint64_t rope_dimension_count = 0;
    double norm_eps = 1e-5;
    double rope_base = 10000.0;  // llama.rope.freq_base is written only when it differs from llama.cpp's default
};

std::vector<GgufEntry> llama_metadata(const LlamaHyperParameters& p);

}  // namespace kiln
