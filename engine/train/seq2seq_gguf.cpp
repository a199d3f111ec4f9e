#include "engine/train/seq2seq_gguf.h"

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

namespace {

// Fills `w` with the model (and the training state); `converted` holds the
// converted tensors until the writer is done.
void describe(GgufWriter& w, std::vector<std::vector<std::byte>>& converted, const Seq2SeqModel& model,
              const Seq2SeqVocabulary& vocabulary, DType type, const TrainingState* training) {
    const Seq2SeqConfig& c = model.config();
    if (vocabulary.tokens.size() != static_cast<size_t>(c.vocab) || vocabulary.types.size() != vocabulary.tokens.size())
        fail("gguf", "{} tokens ({} types) for a vocabulary of {}", vocabulary.tokens.size(), vocabulary.types.size(), c.vocab);
    std::vector<GgufEntry> tokenizer = {
        {"tokenizer.ggml.model", GgufValue("char")},
        {"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, vocabulary.tokens)},
        {"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, vocabulary.types)},
    };
    const SpecialTokens& special = vocabulary.special;
    const auto id = [](int32_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    if (special.bos >= 0) tokenizer.push_back({"tokenizer.ggml.bos_token_id", id(special.bos)});
    if (special.eos >= 0) tokenizer.push_back({"tokenizer.ggml.eos_token_id", id(special.eos)});
    if (special.pad >= 0) tokenizer.push_back({"tokenizer.ggml.padding_token_id", id(special.pad)});
    tokenizer.push_back({"tokenizer.ggml.add_bos_token", GgufValue(false)});
    describe_trained_model(w, model.params().metadata(), std::move(tokenizer), model, type, training, converted);
}

}  // namespace

void write_seq2seq_model(const std::filesystem::path& path, const Seq2SeqModel& model, const Seq2SeqVocabulary& vocabulary,
                         DType type, const TrainingState* training) {
    GgufWriter w;
    std::vector<std::vector<std::byte>> converted;
    describe(w, converted, model, vocabulary, type, training);
    w.write(path);
}

std::vector<std::byte> seq2seq_model_bytes(const Seq2SeqModel& model, const Seq2SeqVocabulary& vocabulary, DType type) {
    GgufWriter w;
    std::vector<std::vector<std::byte>> converted;
    describe(w, converted, model, vocabulary, type, nullptr);
    return w.to_bytes();
}

LoadedSeq2Seq read_seq2seq_checkpoint(const std::filesystem::path& path) {
    const GgufFile file = GgufFile::open(path);
    const std::string where = path.string();
    if (file.get_string("general.architecture") != arch::kTransformer)
        fail("checkpoint", "{}: architecture {} is not transformer", where, file.get_string("general.architecture"));
    LoadedSeq2Seq out;
    out.vocabulary = read_vocabulary(file, where);
    out.config = Seq2SeqConfig::of(arch::TransformerParams::read(file));
    if (out.config.vocab != static_cast<int64_t>(out.vocabulary.size()))
        fail("checkpoint", "{}: {} tokens for an embedding of {}", where, out.vocabulary.size(), out.config.vocab);
    const Seq2SeqModel model(out.config);  // validates the sizes
    out.data = read_param_tensors(file, model, where);
    out.training = read_training_state(file, model, where);
    return out;
}

}  // namespace kiln::train
