#include "engine/train/seq2seq_gguf.h"

#include "engine/core/error.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

void write_seq2seq_model(const std::filesystem::path& path, const Seq2SeqModel& model,
                         const std::vector<std::string>& vocabulary, const std::vector<int32_t>& token_types,
                         SpecialTokens special, DType type) {
    const Seq2SeqConfig& c = model.config();
    if (vocabulary.size() != static_cast<size_t>(c.vocab) || token_types.size() != vocabulary.size())
        fail("gguf", "{} tokens ({} types) for a vocabulary of {}", vocabulary.size(), token_types.size(), c.vocab);
    GgufWriter w;
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
    w.set("tokenizer.ggml.tokens", gguf_array(GgufType::STRING, vocabulary));
    w.set("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, token_types));
    if (special.bos >= 0) w.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(special.bos));
    if (special.eos >= 0) w.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(special.eos));
    if (special.pad >= 0) w.set("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(special.pad));
    w.set("tokenizer.ggml.add_bos_token", false);
    std::vector<std::vector<std::byte>> converted;
    converted.reserve(model.tensors().size());
    for (const ParamTensor& t : model.tensors()) {
        const float* p = model.data().data() + t.segment.offset;
        DType out = DType::F32;
        if (t.is_matrix() && type != DType::F32)
            out = t.dims[0] % static_cast<uint64_t>(type_traits(type).block_size) == 0 ? type : DType::F16;
        if (out == DType::F32) {
            w.add_tensor(t.name, DType::F32, t.dims, {reinterpret_cast<const std::byte*>(p), t.segment.count * sizeof(float)});
            continue;
        }
        converted.emplace_back(*checked_bytes(out, t.segment.count));
        type_traits(out).from_float_ref(p, converted.back().data(), static_cast<int64_t>(t.segment.count));
        w.add_tensor(t.name, out, t.dims, converted.back());
    }
    w.write(path);
}

}  // namespace kiln::train
