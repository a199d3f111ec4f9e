#include "engine/models/architectures.h"

#include <set>

#include <fmt/ranges.h>

#include "engine/core/printable.h"

#include "engine/core/error.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/transformer.h"

namespace kiln {

// Each decoder-only architecture: its general.architecture name, whose file
// engine/models/<name>.cpp defines load_<name>_decoder. Adding one is its own
// files and one line here.
#define KILN_DECODER_ARCHITECTURES(X) \
    X(llama)                          \
    X(gpt2)                           \
    X(minicpm)                        \
    X(qwen2)                          \
    X(gemma)                          \
    X(gemma2)                         \
    X(phi3)

#define KILN_DECLARE_DECODER(name) std::unique_ptr<DecoderArch> load_##name##_decoder(const GgufFile& file);
KILN_DECODER_ARCHITECTURES(KILN_DECLARE_DECODER)
#undef KILN_DECLARE_DECODER

namespace {

struct DecoderEntry {
    const char* name;
    std::unique_ptr<DecoderArch> (*load)(const GgufFile& file);
};

#define KILN_DECODER_ENTRY(name) DecoderEntry{#name, &load_##name##_decoder},
constexpr DecoderEntry kDecoders[] = {KILN_DECODER_ARCHITECTURES(KILN_DECODER_ENTRY)};
#undef KILN_DECODER_ENTRY

constexpr const char* kSeq2seq = "transformer";

// A tensor the architecture does not use would be ignored: refused instead
// (it may be a piece of the model kiln does not implement).
void refuse_unused_tensors(const GgufFile& file, const DecoderArch& decoder) {
    std::set<std::string, std::less<>> used;
    for (const arch::TensorSpec& s : decoder.tensor_specs()) used.insert(s.name);
    for (const GgufTensor& t : file.tensors())
        if (!used.contains(t.name))
            fail("model", "{}: tensor '{}' is not used by kiln's {} (it may be part of the model kiln does not "
                 "implement; refusing rather than ignoring it)", file.name(), printable(t.name), decoder.name());
}

std::unique_ptr<DecoderArch> load_checked(const DecoderEntry& e, const GgufFile& file) {
    std::unique_ptr<DecoderArch> decoder = e.load(file);
    refuse_unused_tensors(file, *decoder);
    return decoder;
}

// A file with a vocabulary and no weights (llama.cpp's ggml-vocab-*.gguf, or
// kiln-convert --no-tokenizer's opposite) is not a model: say so before any
// "tensor is missing".
void refuse_without_tensors(const GgufFile& file) {
    if (!file.tensors().empty()) return;
    if (file.find("tokenizer.ggml.model") != nullptr)
        fail("model", "{} holds only a vocabulary (tokenizer metadata, no tensors), not a model: kiln-tokenize reads "
                      "it; kiln-convert --tokenizer {} embeds it in a converted checkpoint",
             file.name(), file.name());
    fail("model", "{} holds no tensors: it is not a model", file.name());
}

}  // namespace

std::vector<std::string> decoder_architectures() {
    std::vector<std::string> names;
    for (const DecoderEntry& e : kDecoders) names.emplace_back(e.name);
    return names;
}

bool is_seq2seq(const GgufFile& file) { return file.get_string("general.architecture") == kSeq2seq; }

std::unique_ptr<TransformerModel> load_seq2seq(std::shared_ptr<const GgufFile> file, WeightPlacement placement) {
    refuse_without_tensors(*file);
    const std::string arch = file->get_string("general.architecture");
    if (arch != kSeq2seq)
        fail("model", "{}: '{}' is not an encoder-decoder model (that is '{}')", file->name(), arch, kSeq2seq);
    return std::make_unique<TransformerModel>(std::move(file), placement);
}

std::string check_model(const GgufFile& file) {
    refuse_without_tensors(file);
    const std::string arch = file.get_string("general.architecture");
    if (arch == kSeq2seq) {
        check_transformer(file);
        return arch;
    }
    for (const DecoderEntry& e : kDecoders)
        if (arch == e.name) return load_checked(e, file)->name();
    fail("model", "{}: architecture '{}' is not supported (supported: {}, {})", file.name(), arch,
         fmt::join(decoder_architectures(), ", "), kSeq2seq);
}

std::unique_ptr<CausalLm> load_causal_lm(std::shared_ptr<const GgufFile> file, WeightPlacement placement) {
    return load_decoder_stage(std::move(file), placement, [](const DecoderArch&) { return LayerStage{}; });
}

std::unique_ptr<DecoderLm> load_decoder_stage(std::shared_ptr<const GgufFile> file, WeightPlacement placement,
                                              const std::function<LayerStage(const DecoderArch&)>& stage) {
    refuse_without_tensors(*file);
    const std::string arch = file->get_string("general.architecture");
    for (const DecoderEntry& e : kDecoders)
        if (arch == e.name) {
            std::unique_ptr<DecoderArch> decoder = load_checked(e, *file);
            const LayerStage chosen = stage(*decoder);
            return std::make_unique<DecoderLm>(std::move(file), std::move(decoder), placement, chosen);
        }
    if (arch == kSeq2seq)
        fail("model", "{}: '{}' is an encoder-decoder model, not a decoder-only one", file->name(), arch);
    fail("model", "{}: architecture '{}' is not supported (supported: {}, {})", file->name(), arch,
         fmt::join(decoder_architectures(), ", "), kSeq2seq);
}

}  // namespace kiln
