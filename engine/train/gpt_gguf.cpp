#include "engine/train/gpt_gguf.h"

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

void write_gpt_model(const std::filesystem::path& path, const GptModel& model, const std::vector<std::string>& vocabulary,
                     DType type, const TrainingState* training) {
    if (training != nullptr && type != DType::F32) fail("gguf", "checkpoints are F32");
    const GptConfig& c = model.config();
    if (vocabulary.size() != static_cast<size_t>(c.vocab))
        fail("gguf", "{} tokens for a vocabulary of {}", vocabulary.size(), c.vocab);
    GgufWriter w;
    w.set("general.architecture", "gpt2");
    w.set("general.name", "kiln-train char GPT");
    w.set("gpt2.context_length", static_cast<uint32_t>(c.context));
    w.set("gpt2.embedding_length", static_cast<uint32_t>(c.width));
    w.set("gpt2.feed_forward_length", static_cast<uint32_t>(c.ffn));
    w.set("gpt2.block_count", static_cast<uint32_t>(c.layers));
    w.set("gpt2.attention.head_count", static_cast<uint32_t>(c.heads));
    w.set("gpt2.attention.layer_norm_epsilon", c.eps);
    w.set("tokenizer.ggml.model", "char");
    w.set("tokenizer.ggml.tokens", gguf_array(GgufType::STRING, vocabulary));
    w.set("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, std::vector<int32_t>(vocabulary.size(), 1)));
    w.set("tokenizer.ggml.add_bos_token", false);
    std::vector<std::vector<std::byte>> converted;  // alive until write()
    add_param_tensors(w, model, type, converted);
    if (training != nullptr) add_training_state(w, model, *training);
    w.write(path);
}

LoadedGpt read_gpt_checkpoint(const std::filesystem::path& path, bool decay_embeddings) {
    const GgufFile file = GgufFile::open(path);
    const std::string where = path.string();
    if (file.get_string("general.architecture") != "gpt2")
        fail("checkpoint", "{}: architecture {} is not gpt2", where, file.get_string("general.architecture"));
    if (file.get_string("tokenizer.ggml.model") != "char")
        fail("checkpoint", "{}: the vocabulary is not a char vocabulary", where);
    LoadedGpt out;
    out.vocabulary = read_vocabulary(file, where);
    GptConfig& c = out.config;
    c.vocab = static_cast<int64_t>(out.vocabulary.size());
    c.context = file.get_int("gpt2.context_length");
    c.width = file.get_int("gpt2.embedding_length");
    c.ffn = file.get_int("gpt2.feed_forward_length");
    c.layers = file.get_int("gpt2.block_count");
    c.heads = file.get_int("gpt2.attention.head_count");
    c.eps = static_cast<float>(file.get_number("gpt2.attention.layer_norm_epsilon"));
    c.bias = file.find_tensor("blk.0.attn_qkv.bias") != nullptr;
    const GptModel model(c, decay_embeddings);  // validates the sizes
    out.data = read_param_tensors(file, model, where);
    out.training = read_training_state(file, model, where);
    return out;
}

}  // namespace kiln::train
