#include "formats/arch/phi3_arch.h"

#include "engine/core/error.h"

namespace kiln::arch {

namespace {

constexpr const char* kSlidingWindow = "attention.sliding_window";

// llama.cpp's windows for the released Phi-3 files written before the key existed.
int64_t legacy_window(const LlamaParams& l) {
    if ((l.n_layers == 32 || l.n_layers == 40) && l.n_ctx_train == 4096) return 2047;
    if (l.n_layers == 32 && l.n_kv_heads == 32 && l.n_ctx_train == 131072) return 262144;
    if (l.n_layers == 40 && l.n_ctx_train == 131072) return 131072;
    return 0;
}

}  // namespace

Phi3Params Phi3Params::read(const MetadataView& f) {
    Phi3Params p;
    p.llama = LlamaParams::read(f, kPhi3, {kSlidingWindow});
    const LlamaParams& l = p.llama;
    if (l.key_length != 0 && l.key_length * l.n_heads != l.dim)
        fail("model", "{}: {} is {}, but phi3's heads are width/heads = {}", f.name(), l.key("attention.key_length"),
             l.key_length, l.dim / l.n_heads);
    const std::string key = l.key(kSlidingWindow);
    if (f.find(key) != nullptr) {
        p.sliding_window = f.get_int(key);
        if (p.sliding_window < 0) fail("model", "{}: {} is {} (0 for none, or a number of positions)", f.name(), key,
                                       p.sliding_window);
    } else {
        p.sliding_window = legacy_window(l);
        if (p.sliding_window == 0)
            fail("model", "{}: {} is missing (phi3 files say their window, 0 for none)", f.name(), key);
    }
    return p;
}

std::vector<TensorSpec> phi3_tensor_specs(const Phi3Params& p) {
    std::vector<TensorSpec> specs;
    phi3_tensors<int>(p, [&](TensorSpec s) {
        specs.push_back(std::move(s));
        return 0;
    });
    return specs;
}

}  // namespace kiln::arch
