#include "engine/train/param_gguf.h"

#include <cmath>
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

void load_tensors(const GgufFile& file, const ParamModel& model, const std::string& prefix, const std::string& where,
                  std::vector<float>& into) {
    into.assign(model.data().size(), 0.0f);
    for (const ParamTensor& t : model.tensors()) {
        const std::string name = prefix + t.name;
        const GgufTensor* tensor = file.find_tensor(name);
        if (tensor == nullptr) fail("checkpoint", "{}: tensor {} is missing", where, name);
        if (tensor->type != DType::F32 || tensor->dims != t.dims)
            fail("checkpoint", "{}: tensor {} is not F32 of the expected shape", where, name);
        float* values = into.data() + t.segment.offset;
        std::memcpy(values, tensor->data.data(), t.segment.count * sizeof(float));
        // A NaN here would run a whole step before the loss shows it, and a
        // negative second moment makes the update's square root NaN.
        const bool second_moment = prefix == "adam_v.";
        for (size_t i = 0; i < t.segment.count; ++i)
            if (!std::isfinite(values[i]) || (second_moment && values[i] < 0.0f))
                fail("checkpoint", "{}: tensor {} holds {} at element {}: the checkpoint is damaged", where, name,
                     values[i], i);
    }
}

}  // namespace

void add_param_tensors(GgufWriter& w, const ParamModel& model, DType type, std::vector<std::vector<std::byte>>& converted) {
    if (type_traits(type).from_float_ref == nullptr) fail("gguf", "cannot write tensors of type {}", dtype_name(type));
    for (const ParamTensor& t : model.tensors()) {
        const float* p = model.data().data() + t.segment.offset;
        DType out = DType::F32;
        if (t.is_matrix() && type != DType::F32)
            out = t.dims[0] % static_cast<uint64_t>(type_traits(type).block_size) == 0 ? type : DType::F16;
        if (out == DType::F32) {
            w.add_tensor(t.name, DType::F32, t.dims, bytes_of(p, t.segment.count));
            continue;
        }
        converted.emplace_back(*checked_bytes(out, t.segment.count));
        type_traits(out).from_float_ref(p, converted.back().data(), static_cast<int64_t>(t.segment.count));
        w.add_tensor(t.name, out, t.dims, converted.back());
    }
}

void add_training_state(GgufWriter& w, const ParamModel& model, const TrainingState& state) {
    if (state.adam_m.size() != model.data().size() || state.adam_v.size() != model.data().size())
        fail("gguf", "optimizer moments do not match the model");
    w.set(kStepKey, static_cast<uint64_t>(state.step));
    w.set(kRngKey, state.rng_state);
    for (const ParamTensor& t : model.tensors()) {
        w.add_tensor("adam_m." + t.name, DType::F32, t.dims, bytes_of(state.adam_m.data() + t.segment.offset, t.segment.count));
        w.add_tensor("adam_v." + t.name, DType::F32, t.dims, bytes_of(state.adam_v.data() + t.segment.offset, t.segment.count));
    }
}

std::vector<float> read_param_tensors(const GgufFile& file, const ParamModel& model, const std::string& where) {
    std::vector<float> data;
    load_tensors(file, model, "", where, data);
    return data;
}

void describe_trained_model(GgufWriter& w, std::vector<GgufEntry> architecture, std::vector<GgufEntry> tokenizer,
                            const ParamModel& model, DType type, const TrainingState* training,
                            std::vector<std::vector<std::byte>>& converted) {
    if (training != nullptr && type != DType::F32) fail("gguf", "checkpoints are F32");
    for (GgufEntry& e : architecture) w.set(std::move(e.key), std::move(e.value));
    for (GgufEntry& e : tokenizer) w.set(std::move(e.key), std::move(e.value));
    add_param_tensors(w, model, type, converted);
    if (training != nullptr) {
        add_training_state(w, model, *training);
        w.add_tensor_data_checksum();  // weights and moments are just other numbers when bytes flip
    }
}

std::vector<GgufEntry> char_tokenizer_metadata(const std::vector<std::string>& tokens) {
    return {
        {"tokenizer.ggml.model", GgufValue("char")},
        {"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)},
        {"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, std::vector<int32_t>(tokens.size(), 1))},
        {"tokenizer.ggml.add_bos_token", GgufValue(false)},
    };
}

std::vector<std::string> read_vocabulary(const GgufFile& file, const std::string& where) {
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->as_array() == nullptr) fail("checkpoint", "{}: no tokenizer.ggml.tokens", where);
    std::vector<std::string> vocabulary;
    for (const GgufValue& v : tokens->as_array()->items) {
        if (v.as_string() == nullptr) fail("checkpoint", "{}: a token is not a string", where);
        vocabulary.push_back(*v.as_string());
    }
    return vocabulary;
}

std::optional<TrainingState> read_training_state(const GgufFile& file, const ParamModel& model, const std::string& where) {
    if (file.find(kStepKey) == nullptr) return std::nullopt;
    TrainingState s;
    s.step = file.get_int(kStepKey);
    if (s.step < 0) fail("checkpoint", "{}: step {} is negative", where, s.step);
    const GgufValue* rng = file.find(kRngKey);
    if (rng == nullptr || !std::holds_alternative<uint64_t>(rng->value))
        fail("checkpoint", "{}: no generator state ({})", where, kRngKey);
    s.rng_state = std::get<uint64_t>(rng->value);
    load_tensors(file, model, "adam_m.", where, s.adam_m);
    load_tensors(file, model, "adam_v.", where, s.adam_v);
    return s;
}

}  // namespace kiln::train
