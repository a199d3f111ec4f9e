#include "formats/checkpoint/llama_metadata.h"

namespace kiln {

std::vector<GgufEntry> llama_metadata(const LlamaHyperParameters& p) {
    // Integers as u32 and eps as f32, as llama.cpp writes them.
    const auto u32 = [](uint64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    std::vector<GgufEntry> md = {
        {"general.architecture", GgufValue("llama")},
        {"general.name", GgufValue(p.name)},
        {"llama.context_length", u32(p.context_length)},
        {"llama.embedding_length", u32(p.embedding_length)},
        {"llama.feed_forward_length", u32(p.feed_forward_length)},
        {"llama.attention.head_count", u32(p.head_count)},
        {"llama.attention.head_count_kv", u32(p.head_count_kv)},
        {"llama.block_count", u32(p.block_count)},
        {"llama.rope.dimension_count", u32(p.rope_dimension_count)},
        {"llama.attention.layer_norm_rms_epsilon", GgufValue(static_cast<float>(p.norm_eps))},
    };
    if (p.rope_base != 10000.0) md.push_back({"llama.rope.freq_base", GgufValue(static_cast<float>(p.rope_base))});
    return md;
}

}  // namespace kiln
