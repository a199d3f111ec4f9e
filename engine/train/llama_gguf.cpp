#include "engine/train/llama_gguf.h"

#include "engine/core/error.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

namespace {

constexpr std::string_view kTokenizerPrefix = "tokenizer.";

int64_t token_count(const std::vector<GgufEntry>& metadata, const std::string& where) {
    for (const GgufEntry& e : metadata)
        if (e.key == "tokenizer.ggml.tokens")
            if (const GgufArray* a = e.value.as_array()) return static_cast<int64_t>(a->items.size());
    fail("checkpoint", "{}: the tokenizer has no tokenizer.ggml.tokens", where);
}

}  // namespace

TrainedTokenizer char_tokenizer(const std::vector<std::string>& chars) {
    return {char_tokenizer_metadata(chars), static_cast<int64_t>(chars.size())};
}

TrainedTokenizer gguf_tokenizer(const GgufFile& file) {
    TrainedTokenizer t;
    for (const GgufEntry& e : file.metadata())
        if (e.key.starts_with(kTokenizerPrefix)) t.metadata.push_back(e);
    t.n_vocab = token_count(t.metadata, file.name());
    return t;
}

void write_llama_model(const std::filesystem::path& path, const LlamaTrainModel& model, const TrainedTokenizer& tokenizer,
                       DType type, const TrainingState* training) {
    if (tokenizer.n_vocab != model.params().n_vocab)
        fail("gguf", "{} tokens for a vocabulary of {}", tokenizer.n_vocab, model.params().n_vocab);
    GgufWriter w;
    std::vector<std::vector<std::byte>> converted;  // alive until write()
    describe_trained_model(w, model.params().metadata(), tokenizer.metadata, model, type, training, converted);
    w.write(path);
}

LoadedLlama read_llama_checkpoint(const std::filesystem::path& path, bool decay_embeddings) {
    const GgufFile file = GgufFile::open(path);
    const std::string where = path.string();
    LoadedLlama out;
    out.params = arch::LlamaParams::read(file);
    out.tied = file.find_tensor(arch::llama_tensor_names(out.params).output) == nullptr;
    out.tokenizer = gguf_tokenizer(file);
    if (out.tokenizer.n_vocab != out.params.n_vocab)
        fail("checkpoint", "{}: {} tokens for an embedding of {}", where, out.tokenizer.n_vocab, out.params.n_vocab);
    const LlamaTrainModel model(out.params, out.tied, decay_embeddings);  // validates the sizes
    out.data = read_param_tensors(file, model, where);
    out.training = read_training_state(file, model, where);
    return out;
}

}  // namespace kiln::train
