#pragma once
// Untrusted JSON (config.json, tokenizer.json, tokenizer_config.json, the
// safetensors header) read within limits. nlohmann's parser itself keeps its
// own stack, but copying, comparing and dumping a value recurse once per level:
// a file of a million '[' parses, then overflows the stack the first time it is
// copied or printed. Nesting is therefore measured before parsing (no file
// kiln reads nests more than a few levels), and error messages show values
// through json_excerpt, never a whole dump().
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

// Deeper nesting of arrays and objects than any real model file has.
inline constexpr size_t kMaxJsonDepth = 128;

// The deepest nesting of arrays and objects in `text` (brackets inside strings
// do not count); it stops counting once past `limit`.
size_t json_nesting_depth(std::string_view text, size_t limit = kMaxJsonDepth);

// Parses `text` (optionally watched by `callback`). Nesting deeper than
// kMaxJsonDepth, or text that is not JSON: kiln::Error(component, "<where>: ...").
nlohmann::json parse_json_bounded(std::string_view text, std::string_view component, const std::string& where,
                                  const nlohmann::json::parser_callback_t& callback = nullptr);

// `value` as JSON text cut to about `max_chars` characters ("..." marks a
// cut), for error messages: a value from a file may be megabytes long.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace kiln
