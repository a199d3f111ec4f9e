#include "formats/arch/gemma_arch.h"

#include <cmath>

#include "engine/core/error.h"

namespace kiln::arch {

namespace {

constexpr const char* kSlidingWindow = "attention.sliding_window";
constexpr const char* kAttnSoftcap = "attn_logit_softcapping";
constexpr const char* kFinalSoftcap = "final_logit_softcapping";

// llama.cpp's defaults for Gemma 2 files that leave the keys out.
constexpr int64_t kDefaultSlidingWindow = 4096;
constexpr float kDefaultAttnSoftcap = 50.0f;
constexpr float kDefaultFinalSoftcap = 30.0f;

float positive_number(const MetadataView& f, const std::string& key, float fallback) {
    if (f.find(key) == nullptr) return fallback;
    const auto v = static_cast<float>(f.get_number(key));
    if (!std::isfinite(v) || v <= 0.0f) fail("model", "{}: {} is {} (a finite, positive cap)", f.name(), key, v);
    return v;
}

}  // namespace

GemmaParams GemmaParams::read(const MetadataView& f) {
    GemmaParams p;
    const std::string arch = f.get_string("general.architecture");
    p.gemma2 = arch == kGemma2;
    if (!p.gemma2 && arch != kGemma) fail("model", "{}: architecture '{}' is not gemma or gemma2", f.name(), arch);
    const LlamaParams& l = p.llama = p.gemma2 ? LlamaParams::read(f, kGemma2, {kSlidingWindow, kAttnSoftcap, kFinalSoftcap})
                                              : LlamaParams::read(f, kGemma);
    const float per_head = 1.0f / std::sqrt(static_cast<float>(l.head_dim()));
    p.query_scale = per_head;
    if (!p.gemma2) return p;

    p.sliding_window = kDefaultSlidingWindow;
    if (f.find(l.key(kSlidingWindow)) != nullptr) {
        p.sliding_window = f.get_int(l.key(kSlidingWindow));
        if (p.sliding_window <= 0)
            fail("model", "{}: {} is {} (a positive number of positions)", f.name(), l.key(kSlidingWindow),
                 p.sliding_window);
    }
    p.attn_softcap = positive_number(f, l.key(kAttnSoftcap), kDefaultAttnSoftcap);
    p.final_softcap = positive_number(f, l.key(kFinalSoftcap), kDefaultFinalSoftcap);

    const float per_width = 1.0f / std::sqrt(static_cast<float>(l.dim / l.n_heads));
    if (l.n_layers == 46) {
        p.query_scale = per_width;
    } else if (l.n_layers != 26 && l.n_layers != 42 && per_width != per_head) {
        fail("model", "{}: a gemma2 model of {} layers with heads of {} and width/heads {}: its query scale "
             "(1/sqrt of either; the file does not say which) is known only for 26, 42 and 46 layers",
             f.name(), l.n_layers, l.head_dim(), l.dim / l.n_heads);
    }
    return p;
}

std::vector<TensorSpec> gemma_tensor_specs(const GemmaParams& p) {
    std::vector<TensorSpec> specs;
    gemma_tensors<int>(p, [&](TensorSpec s) {
        specs.push_back(std::move(s));
        return 0;
    });
    return specs;
}

}  // namespace kiln::arch
