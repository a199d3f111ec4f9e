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
    if (training != nullptr && type != DType::F32) fail("gguf", "checkpoints are F32");
    const Seq2SeqConfig& c = model.config();
    if (vocabulary.tokens.size() != static_cast<size_t>(c.vocab) || vocabulary.types.size() != vocabulary.tokens.size())
        fail("gguf", "{} tokens ({} types) for a vocabulary of {}", vocabulary.tokens.size(), vocabulary.types.size(), c.vocab);
    w.set("general.architecture", "transformer");
    w.set("general.name", "kiln-train encoder-decoder");
    w.set("transformer.context_length", static_cast<uint32_t>(c.context));
    w.set("transformer.embedding_length", static_cast<uint32_t>(c.width));
    w.set("transformer.feed_forward_length", static_cast<uint32_t>(c.ffn));
    w.set("transformer.encoder.block_count", static_cast<uint32_t>(c.encoder_layers));
    w.set("transformer.decoder.block_count", static_cast<uint32_t>(c.decoder_layers));
    w.set("transformer.attention.head_count", static_cast<uint32_t>(c.heads));
    w.set("transformer.attention.layer_norm_epsilon", c.eps);
    w.set("transformer.norm_first", c.norm_first);
    w.set("transformer.ffn_activation", c.gelu ? "gelu" : "relu");
    w.set("tokenizer.ggml.model", "char");
    w.set("tokenizer.ggml.tokens", gguf_array(GgufType::STRING, vocabulary.tokens));
    w.set("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, vocabulary.types));
    const SpecialTokens& special = vocabulary.special;
    if (special.bos >= 0) w.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(special.bos));
    if (special.eos >= 0) w.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(special.eos));
    if (special.pad >= 0) w.set("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(special.pad));
    w.set("tokenizer.ggml.add_bos_token", false);
    add_param_tensors(w, model, type, converted);
    if (training != nullptr) add_training_state(w, model, *training);
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
    if (file.get_string("general.architecture") != "transformer")
        fail("checkpoint", "{}: architecture {} is not transformer", where, file.get_string("general.architecture"));
    LoadedSeq2Seq out;
    out.vocabulary = read_vocabulary(file, where);
    Seq2SeqConfig& c = out.config;
    c.vocab = static_cast<int64_t>(out.vocabulary.size());
    c.context = file.get_int("transformer.context_length");
    c.width = file.get_int("transformer.embedding_length");
    c.ffn = file.get_int("transformer.feed_forward_length");
    c.encoder_layers = file.get_int("transformer.encoder.block_count");
    c.decoder_layers = file.get_int("transformer.decoder.block_count");
    c.heads = file.get_int("transformer.attention.head_count");
    c.eps = static_cast<float>(file.get_number("transformer.attention.layer_norm_epsilon"));
    const GgufValue* norm_first = file.find("transformer.norm_first");
    if (norm_first == nullptr || !norm_first->as_bool()) fail("checkpoint", "{}: no transformer.norm_first", where);
    c.norm_first = *norm_first->as_bool();
    const std::string activation = file.get_string("transformer.ffn_activation");
    if (activation != "relu" && activation != "gelu")
        fail("checkpoint", "{}: transformer.ffn_activation '{}' is not relu or gelu", where, activation);
    c.gelu = activation == "gelu";
    const Seq2SeqModel model(c);  // validates the sizes
    out.data = read_param_tensors(file, model, where);
    out.training = read_training_state(file, model, where);
    return out;
}

}  // namespace kiln::train
