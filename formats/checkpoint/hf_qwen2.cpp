#include "formats/checkpoint/hf_qwen2.h"

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_common.h"
#include "formats/checkpoint/hf_llama.h"

namespace kiln {

Checkpoint hf_qwen2_checkpoint(const std::filesystem::path& given) {
    const std::filesystem::path folder = given.has_filename() ? given : given.parent_path();
    const HfConfig config(folder, read_hf_json(folder / "config.json"));
    if (const std::string a = config.architecture(); !a.empty() && a != "Qwen2ForCausalLM")
        fail("hf", "{}: architectures is [{}]; this reader takes [\"Qwen2ForCausalLM\"]", config.where(), printable(a));
    return hf_llama_family_checkpoint(config, HfLlamaKind::Qwen2);
}

}  // namespace kiln
