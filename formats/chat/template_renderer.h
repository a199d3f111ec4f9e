#pragma once
// Renders a parsed chat template (template_parser.h): jinja2's statements,
// scoping (a for loop's body and a macro have their own variables; if does
// not), expression semantics and globals (range, namespace, dict,
// raise_exception, strftime_now), within limits that keep a hostile template
// from hanging or exhausting memory.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "formats/chat/template_ast.h"

namespace kiln::chat {

struct RenderLimits {
    int max_nesting_depth = 256;            // parser: statements and expressions
    int max_call_depth = 128;               // macro calls inside macro calls
    int64_t max_loop_iterations = 1000000;  // all for loops of one rendering together
    size_t max_output_bytes = 16u << 20;    // the output and any string or list built on the way
};

struct RenderOptions {
    RenderLimits limits;
    // What strftime_now formats; the current local time when absent.
    std::optional<std::tm> now;
};

// Throws kiln::Error("chat", ...) naming the template line for any error,
// including raise_exception("message"), which reads "raise_exception: message".
std::string render_template(const Body& body, const ValueDict& variables, const RenderOptions& options);

// Fails for a filter or test name kiln does not know, anywhere in the
// template (jinja2 refuses such a template before rendering).
void check_builtin_names(const Body& body);

}  // namespace kiln::chat
