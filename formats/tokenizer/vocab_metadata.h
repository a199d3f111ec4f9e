#pragma once
// Reading the tokenizer.ggml.* keys of a GGUF file, for every tokenizer: each
// missing or ill-typed key throws kiln::Error("tokenizer", ...) naming the
// file and the key, so a broken vocabulary reads as one clear line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_value.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln {

class GgufFile;

namespace vocab {

inline constexpr std::string_view kComponent = "tokenizer";

// The value of a key that must be there.
const GgufValue& require_key(const GgufFile& file, std::string_view key);

// tokenizer.ggml.model as a string.
std::string model_name(const GgufFile& file);

bool is_integer_type(GgufType type) noexcept;
bool is_number_type(GgufType type) noexcept;

// An array whose elements are of a type `accepts` allows; `expected` names it
// for the message ("str", "i32").
const GgufArray& require_array(const GgufFile& file, std::string_view key, std::string_view expected,
                               bool (*accepts)(GgufType) noexcept);

// tokenizer.ggml.tokens: a non-empty array of strings that int32 ids can number.
std::vector<std::string> require_tokens(const GgufFile& file);

// A token id that must be there and inside a vocabulary of `vocab_size`.
int32_t require_token_id(const GgufFile& file, std::string_view key, size_t vocab_size);
// The same for an optional key: -1 when it is absent.
int32_t optional_token_id(const GgufFile& file, std::string_view key, size_t vocab_size);

// tokenizer.ggml.token_type when present (same length as the vocabulary,
// values 1 to 6), else every token normal.
std::vector<TokenType> optional_token_types(const GgufFile& file, size_t vocab_size);

bool optional_bool(const GgufFile& file, std::string_view key, bool fallback);

}  // namespace vocab
}  // namespace kiln
