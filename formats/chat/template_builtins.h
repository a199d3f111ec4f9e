#pragma once
// What jinja2 and Python give a template to work with: attribute, item and
// slice access (template_access.cpp: dicts, strings and lists with their
// methods, as the immutable sandbox allows them), and the filters and tests
// (template_filters.cpp). Errors are kiln::Error("chat", ...) naming the
// template line.
#include <string>
#include <string_view>
#include <vector>

#include "formats/chat/template_value.h"

namespace kiln::chat {

// ---- template_access.cpp ----

// obj.name: a dict's key or method, a str's or list's method; undefined when
// missing; an error on an undefined object (jinja2's UndefinedError).
Value get_attribute(const Value& object, const std::string& name, int line);
// obj[key]: a dict's key, a list's or str's index (negative from the end);
// undefined when missing.
Value get_item(const Value& object, const Value& key, int line);
// obj[start:stop:step] on a str, list or tuple; undefined parts are None.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step, int line);
// The items a for loop or filter walks: a list's items, a dict's keys, a
// str's characters, nothing for undefined; an error for anything else.
std::vector<Value> iterate(const Value& value, int line);
// Python's a < b for numbers, strings and lists; an error for other pairs.
bool python_less(const Value& a, const Value& b, int line);
// `needle in haystack`.
bool python_contains(const Value& haystack, const Value& needle, int line);
// The error jinja2 raises when an undefined value is used.
[[noreturn]] void fail_undefined(const Value& value, int line);

// Reads a builtin's arguments by position or keyword, as Python binds them.
class ArgReader {
public:
    ArgReader(CallArgs& args, std::string_view function) : args_(args), function_(function) {}
    // Argument `position` (counted without the filtered value) or keyword `name`.
    Value get(size_t position, std::string_view name, Value fallback = Value());
    bool has(size_t position, std::string_view name) const;
    // Fails when an argument was passed that no get() read.
    void done() const;
    int line() const { return args_.line; }

private:
    CallArgs& args_;
    std::string_view function_;
    size_t positional_used_ = 0;
    std::vector<std::string> keywords_used_;
};

// ---- template_filters.cpp ----

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);
// value | name(args)
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
// value is name(args)
bool apply_test(const std::string& name, const Value& input, CallArgs& args);

}  // namespace kiln::chat
