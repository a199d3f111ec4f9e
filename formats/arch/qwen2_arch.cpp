#include "formats/arch/qwen2_arch.h"

namespace kiln::arch {

LlamaParams read_qwen2_params(const MetadataView& f) {
    LlamaParams p = LlamaParams::read(f, kQwen2);
    p.qkv_bias = true;
    return p;
}

}  // namespace kiln::arch
