#pragma once
// The chat formats llama.cpp knows by name (`--chat-template chatml`, `gemma`,
// `llama3`, ...), written here as Jinja templates for kiln's interpreter, so that
// a name and a template text go through one path. Each renders what
// llama.cpp's built-in formatter of that name writes for the same messages
// (tests/reference/make_named_template_fixtures.py holds them against it).
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// The template of a name llama.cpp accepts, or nothing for a name kiln lacks.
std::optional<std::string> named_chat_template(std::string_view name);

// The names, comma-separated, for help texts and errors.
std::string named_chat_template_names();

// What --chat-template VALUE means, as in llama.cpp: a name from the list, or
// else a Jinja template text itself. A value that is neither (no "{{" or "{%")
// is a kiln::Error naming the flag and the names kiln knows.
std::string chat_template_from_flag(std::string_view value);

}  // namespace kiln
