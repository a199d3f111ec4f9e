#include "engine/train/gpt_gguf.h"

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

void write_gpt_model(const std::filesystem::path& path, const GptModel& model, const std::vector<std::string>& vocabulary,
                     DType type, const TrainingState* training) {
    const GptConfig& c = model.config();
    if (vocabulary.size() != static_cast<size_t>(c.vocab))
        fail("gguf", "{} tokens for a vocabulary of {}", vocabulary.size(), c.vocab);
    GgufWriter w;
    std::vector<std::vector<std::byte>> converted;  // alive until write()
    describe_trained_model(w, model.params().metadata(), char_tokenizer_metadata(vocabulary), model, type, training,
                           converted);
    w.write(path);
}

LoadedGpt read_gpt_checkpoint(const std::filesystem::path& path, bool decay_embeddings) {
    const GgufFile file = GgufFile::open(path);
    const std::string where = path.string();
    if (file.get_string("general.architecture") != arch::kGpt2)
        fail("checkpoint", "{}: architecture {} is not gpt2", where, file.get_string("general.architecture"));
    if (file.get_string("tokenizer.ggml.model") != "char")
        fail("checkpoint", "{}: the vocabulary is not a char vocabulary", where);
    LoadedGpt out;
    out.vocabulary = read_vocabulary(file, where);
    const arch::Gpt2Params p = arch::Gpt2Params::read(file);
    bool bias = false;  // linear biases (nanoGPT's bias=True)
    for (const arch::TensorSpec& s : arch::gpt2_tensor_specs(p))
        if (s.role == arch::TensorRole::Bias && file.find_tensor(s.name) != nullptr) bias = true;
    out.config = GptConfig::of(p, bias);
    if (out.config.vocab != static_cast<int64_t>(out.vocabulary.size()))
        fail("checkpoint", "{}: {} tokens for an embedding of {}", where, out.vocabulary.size(), out.config.vocab);
    const GptModel model(out.config, decay_embeddings);  // validates the sizes
    out.data = read_param_tensors(file, model, where);
    out.training = read_training_state(file, model, where);
    return out;
}

}  // namespace kiln::train
