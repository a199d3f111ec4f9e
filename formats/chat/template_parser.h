#pragma once
// Parses the pieces of a chat template (template_lexer.h) into statements and
// expressions (template_ast.h) with jinja2's grammar and operator precedence.
// Constructs kiln does not render (include, extends, import, block, raw,
// recursive loops, *args in calls) are errors naming the construct and line.
#include <string_view>

#include "formats/chat/template_ast.h"

namespace kiln::chat {

// Throws kiln::Error("chat", ...) for a syntax error, an unclosed block or a
// template nested deeper than max_depth (statements and expressions together).
Body parse_template(std::string_view source, int max_depth);

}  // namespace kiln::chat
