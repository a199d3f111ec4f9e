#include "engine/models/causal_lm.h"

#include "engine/core/error.h"
#include "engine/models/gpt2.h"
#include "engine/models/llama.h"

namespace kiln {

std::unique_ptr<CausalLm> load_causal_lm(std::shared_ptr<const GgufFile> file) {
    const std::string arch = file->get_string("general.architecture");
    if (arch == "llama") return std::make_unique<LlamaLm>(std::move(file));
    if (arch == "gpt2") return std::make_unique<Gpt2Model>(std::move(file));
    if (arch == "transformer")
        fail("model", "{}: '{}' is an encoder-decoder model, not a decoder-only one", file->name(), arch);
    fail("model", "{}: architecture '{}' is not supported (supported: llama, gpt2, transformer)", file->name(), arch);
}

}  // namespace kiln
