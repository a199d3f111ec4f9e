#include "engine/train/gpt_gguf.h"

#include <cstring>
#include <span>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"

namespace kiln::train {

namespace {

constexpr const char* kStepKey = "kiln.train.step";
constexpr const char* kRngKey = "kiln.train.rng_state";

std::span<const std::byte> bytes_of(const float* p, size_t count) {
    return {reinterpret_cast<const std::byte*>(p), count * sizeof(float)};
}

DType stored_type(const ParamTensor& t, DType requested) {
    if (!t.is_matrix() || requested == DType::F32) return DType::F32;
    if (t.dims[0] % static_cast<uint64_t>(type_traits(requested).block_size) != 0) return DType::F16;
    return requested;
}

}  // namespace

void write_gpt_model(const std::filesystem::path& path, const GptModel& model, const std::vector<std::string>& vocabulary,
                     DType type, const TrainingState* training) {
    if (type_traits(type).from_float_ref == nullptr) fail("gguf", "cannot write tensors of type {}", dtype_name(type));
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
    if (training != nullptr) {
        w.set(kStepKey, static_cast<uint64_t>(training->step));
        w.set(kRngKey, training->rng_state);
    }
    std::vector<std::vector<std::byte>> converted;  // alive until write()
    converted.reserve(model.tensors().size());
    for (const ParamTensor& t : model.tensors()) {
        const float* p = model.data().data() + t.segment.offset;
        const DType out = stored_type(t, type);
        if (out == DType::F32) {
            w.add_tensor(t.name, DType::F32, t.dims, bytes_of(p, t.segment.count));
            continue;
        }
        converted.emplace_back(*checked_bytes(out, t.segment.count));
        type_traits(out).from_float_ref(p, converted.back().data(), static_cast<int64_t>(t.segment.count));
        w.add_tensor(t.name, out, t.dims, converted.back());
    }
    if (training != nullptr) {
        if (training->adam_m.size() != model.data().size() || training->adam_v.size() != model.data().size())
            fail("gguf", "optimizer moments do not match the model");
        for (const ParamTensor& t : model.tensors()) {
            w.add_tensor("adam_m." + t.name, DType::F32, t.dims, bytes_of(training->adam_m.data() + t.segment.offset, t.segment.count));
            w.add_tensor("adam_v." + t.name, DType::F32, t.dims, bytes_of(training->adam_v.data() + t.segment.offset, t.segment.count));
        }
    }
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
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->as_array() == nullptr) fail("checkpoint", "{}: no tokenizer.ggml.tokens", where);
    for (const GgufValue& v : tokens->as_array()->items) {
        if (v.as_string() == nullptr) fail("checkpoint", "{}: a token is not a string", where);
        out.vocabulary.push_back(*v.as_string());
    }
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
    out.data.assign(model.data().size(), 0.0f);
    const auto load = [&](const std::string& name, const ParamTensor& t, std::vector<float>& into) {
        const GgufTensor& tensor = file.get_tensor(name);
        if (tensor.type != DType::F32 || tensor.dims != t.dims)
            fail("checkpoint", "{}: tensor {} is not F32 of the expected shape", where, name);
        std::memcpy(into.data() + t.segment.offset, tensor.data.data(), t.segment.count * sizeof(float));
    };
    for (const ParamTensor& t : model.tensors()) load(t.name, t, out.data);
    if (file.find(kStepKey) != nullptr) {
        TrainingState s;
        s.step = file.get_int(kStepKey);
        const GgufValue* rng = file.find(kRngKey);
        if (rng == nullptr || !std::holds_alternative<uint64_t>(rng->value))
            fail("checkpoint", "{}: no generator state ({})", where, kRngKey);
        s.rng_state = std::get<uint64_t>(rng->value);
        s.adam_m.assign(out.data.size(), 0.0f);
        s.adam_v.assign(out.data.size(), 0.0f);
        for (const ParamTensor& t : model.tensors()) {
            load("adam_m." + t.name, t, s.adam_m);
            load("adam_v." + t.name, t, s.adam_v);
        }
        out.training = std::move(s);
    }
    return out;
}

}  // namespace kiln::train
