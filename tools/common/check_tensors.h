#pragma once
// --check-tensors, shared by kiln, kiln-perplexity and kiln-bench: before a
// model is used, every tensor's data is checked as llama.cpp's
// --check-tensors does (engine/quant/validate.h), and the first bad block
// is reported in one line naming the tensor, its type and the block.
#include "engine/core/error.h"
#include "engine/quant/validate.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::cli {

inline void check_tensors(const GgufFile& file) {
    for (const GgufTensor& t : file.tensors()) {
        const auto bad = quant::find_invalid_block(t.type, t.data);
        if (!bad) continue;
        if (type_traits(t.type).block_size == 1)
            fail("check-tensors", "tensor '{}' ({}): element {} is {}", t.name, dtype_name(t.type), bad->block,
                 bad->problem);
        fail("check-tensors", "tensor '{}' ({}): block {} has {} {} scale", t.name, dtype_name(t.type), bad->block,
             bad->problem == "NaN" ? "a NaN" : "an inf", bad->field);
    }
}

}  // namespace kiln::cli
