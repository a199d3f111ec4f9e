#include "convert/loadable_check.h"

#include <fmt/format.h>

#include "formats/arch/gemma_arch.h"
#include "formats/arch/gpt2_arch.h"
#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"
#include "formats/arch/minicpm_arch.h"
#include "formats/arch/phi3_arch.h"
#include "formats/arch/qwen2_arch.h"
#include "formats/arch/transformer_arch.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln::convert {

namespace {

void check_hyper_parameters(const Checkpoint& c, const std::string& name) {
    std::vector<arch::EntryMetadata::Tensor> shapes;
    shapes.reserve(c.tensors.size());
    for (const CheckpointTensor& t : c.tensors) shapes.push_back({t.name, t.dims});
    const arch::EntryMetadata f(name, c.metadata, std::move(shapes));
    const GgufValue* a = f.find("general.architecture");
    if (a == nullptr || a->as_string() == nullptr) return;
    const std::string& architecture = *a->as_string();
    if (architecture == arch::kLlama) (void)arch::LlamaParams::read(f);
    else if (architecture == arch::kQwen2) (void)arch::read_qwen2_params(f);
    else if (architecture == arch::kPhi3) (void)arch::Phi3Params::read(f);
    else if (architecture == arch::kGemma || architecture == arch::kGemma2) (void)arch::GemmaParams::read(f);
    else if (architecture == arch::kMiniCpm) (void)arch::MiniCpmParams::read(f);
    else if (architecture == arch::kGpt2) (void)arch::Gpt2Params::read(f);
    else if (architecture == arch::kTransformer) (void)arch::TransformerParams::read(f);
}

// The tokenizer loader reads a GgufFile: the metadata alone makes one (no
// tensors, so it is as small as the vocabulary).
void check_vocabulary(const Checkpoint& c, const std::string& name) {
    bool has_vocabulary = false;
    GgufWriter metadata_only;
    for (const GgufEntry& e : c.metadata) {
        has_vocabulary = has_vocabulary || e.key == "tokenizer.ggml.model";
        metadata_only.set(e.key, e.value);
    }
    if (!has_vocabulary) return;
    const std::vector<std::byte> bytes = metadata_only.to_bytes();
    const GgufFile file = GgufFile::parse(bytes, name);
    (void)load_tokenizer(file);
}

}  // namespace

void check_loadable(const Checkpoint& c, const std::string& output) {
    const std::string name = fmt::format("{} (not written)", output);
    check_hyper_parameters(c, name);
    check_vocabulary(c, name);
}

}  // namespace kiln::convert
