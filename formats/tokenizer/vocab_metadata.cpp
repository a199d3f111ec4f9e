#include "formats/tokenizer/vocab_metadata.h"

#include <limits>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::vocab {

const GgufValue& require_key(const GgufFile& file, std::string_view key) {
    const GgufValue* value = file.find(key);
    if (value == nullptr)
        fail(kComponent, "{}: metadata key '{}' is missing (is this a model with a vocabulary?)", file.name(), key);
    return *value;
}

std::string model_name(const GgufFile& file) {
    const GgufValue& model = require_key(file, "tokenizer.ggml.model");
    const std::string* name = model.as_string();
    if (name == nullptr)
        fail(kComponent, "{}: metadata key 'tokenizer.ggml.model' has type {} (expected str)", file.name(),
             gguf_type_name(model.type()));
    return *name;
}

bool is_integer_type(GgufType type) noexcept {
    switch (type) {
        case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
        case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
            return true;
        default:
            return false;
    }
}

bool is_number_type(GgufType type) noexcept {
    return is_integer_type(type) || type == GgufType::FLOAT32 || type == GgufType::FLOAT64;
}

const GgufArray& require_array(const GgufFile& file, std::string_view key, std::string_view expected,
                               bool (*accepts)(GgufType) noexcept) {
    const GgufValue& value = require_key(file, key);
    const GgufArray* array = value.as_array();
    if (array == nullptr)
        fail(kComponent, "{}: metadata key '{}' has type {} (expected an array of {})", file.name(), key,
             gguf_type_name(value.type()), expected);
    if (!accepts(array->element_type))
        fail(kComponent, "{}: metadata key '{}' is an array of {} (expected an array of {})", file.name(), key,
             gguf_type_name(array->element_type), expected);
    return *array;
}

std::vector<std::string> require_tokens(const GgufFile& file) {
    const GgufArray& tokens = require_array(file, "tokenizer.ggml.tokens", "str",
                                            [](GgufType t) noexcept { return t == GgufType::STRING; });
    const size_t n = tokens.items.size();
    if (n == 0) fail(kComponent, "{}: tokenizer.ggml.tokens is empty", file.name());
    // Ids are int32 everywhere (model inputs, sampling), so the vocabulary must fit.
    if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(kComponent, "{}: tokenizer.ggml.tokens has {} tokens, more than int32 ids can number", file.name(), n);
    std::vector<std::string> out;
    out.reserve(n);
    for (const GgufValue& item : tokens.items) out.push_back(*item.as_string());
    return out;
}

int32_t require_token_id(const GgufFile& file, std::string_view key, size_t vocab_size) {
    const GgufValue& value = require_key(file, key);
    const std::optional<int64_t> id = value.as_int();
    if (!id)
        fail(kComponent, "{}: metadata key '{}' has type {} (expected an integer token id)", file.name(), key,
             gguf_type_name(value.type()));
    if (*id < 0 || static_cast<uint64_t>(*id) >= vocab_size)
        fail(kComponent, "{}: metadata key '{}' is {}, outside the vocabulary of {} tokens", file.name(), key, *id,
             vocab_size);
    return static_cast<int32_t>(*id);
}

int32_t optional_token_id(const GgufFile& file, std::string_view key, size_t vocab_size) {
    return file.find(key) == nullptr ? -1 : require_token_id(file, key, vocab_size);
}

std::vector<TokenType> optional_token_types(const GgufFile& file, size_t vocab_size) {
    if (file.find("tokenizer.ggml.token_type") == nullptr) return std::vector<TokenType>(vocab_size, TokenType::normal);
    const GgufArray& types = require_array(file, "tokenizer.ggml.token_type", "i32", is_integer_type);
    if (types.items.size() != vocab_size)
        fail(kComponent, "{}: tokenizer.ggml.tokens has {} entries but tokenizer.ggml.token_type has {} (expected the "
             "same length)", file.name(), vocab_size, types.items.size());
    std::vector<TokenType> out;
    out.reserve(vocab_size);
    for (size_t i = 0; i < vocab_size; ++i) {
        const std::optional<int64_t> type = types.items[i].as_int();
        if (!type || *type < 1 || *type > 6)
            fail(kComponent, "{}: tokenizer.ggml.token_type[{}] is {} (expected 1 to 6: normal, unknown, control, "
                 "user-defined, unused, byte)", file.name(), i, type ? fmt::format("{}", *type) : "out of range");
        out.push_back(static_cast<TokenType>(*type));
    }
    return out;
}

bool optional_bool(const GgufFile& file, std::string_view key, bool fallback) {
    const GgufValue* value = file.find(key);
    if (value == nullptr) return fallback;
    if (const std::optional<bool> b = value->as_bool()) return *b;
    fail(kComponent, "{}: metadata key '{}' has type {} (expected bool)", file.name(), key,
         gguf_type_name(value->type()));
}

}  // namespace kiln::vocab
