#pragma once
// The `minicpm` architecture (MiniCPM 1B/2B, llama.cpp's LLM_ARCH_MINICPM):
// llama's tensors and block under its own name, with three scalings of the
// block (minicpm.embedding_scale, residual_scale, logit_scale). Its tensors
// are llama's (llama_arch.h); this file adds only the keys that differ.
#include <string_view>
#include <vector>

#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"

namespace kiln::arch {

inline constexpr std::string_view kMiniCpm = "minicpm";

struct MiniCpmParams {
    LlamaParams llama;  // llama's keys, under "minicpm."
    float embedding_scale = 1.0f;  // token embeddings are multiplied by it
    float residual_scale = 1.0f;   // each sublayer's output, before the residual add
    float logit_scale = 1.0f;      // the logits are divided by it

    // Reads and checks a minicpm file (the three scales are required, as llama.cpp requires them).
    static MiniCpmParams read(const MetadataView& f);
    static MiniCpmParams read(const GgufFile& f) { return read(FileMetadata(f)); }
    std::vector<GgufEntry> metadata() const;
};

}  // namespace kiln::arch
