#include "formats/arch/minicpm_arch.h"

#include <cmath>

#include "engine/core/error.h"

namespace kiln::arch {

namespace {

constexpr const char* kEmbeddingScale = "embedding_scale";
constexpr const char* kResidualScale = "residual_scale";
constexpr const char* kLogitScale = "logit_scale";

}  // namespace

MiniCpmParams MiniCpmParams::read(const MetadataView& f) {
    MiniCpmParams p;
    p.llama = LlamaParams::read(f, kMiniCpm, {kEmbeddingScale, kResidualScale, kLogitScale});
    const auto scale = [&](const char* suffix) {
        const std::string key = p.llama.key(suffix);
        const auto v = static_cast<float>(f.get_number(key));
        if (!std::isfinite(v) || v == 0.0f) fail("model", "{}: {} is {} (a finite, non-zero factor)", f.name(), key, v);
        return v;
    };
    p.embedding_scale = scale(kEmbeddingScale);
    p.residual_scale = scale(kResidualScale);
    p.logit_scale = scale(kLogitScale);
    return p;
}

std::vector<GgufEntry> MiniCpmParams::metadata() const {
    std::vector<GgufEntry> md = llama.metadata();
    md.push_back({llama.key(kEmbeddingScale), GgufValue(embedding_scale)});
    md.push_back({llama.key(kResidualScale), GgufValue(residual_scale)});
    md.push_back({llama.key(kLogitScale), GgufValue(logit_scale)});
    return md;
}

}  // namespace kiln::arch
