// Attribute, item and slice access and the str/dict/list methods templates
// call, with the results Python and jinja2's immutable sandbox give.
#include <algorithm>

#include "engine/core/error.h"
#include "formats/chat/template_builtins.h"
#include "formats/chat/template_text.h"

namespace kiln::chat {

void fail_undefined(const Value& value, int line) {
    fail("chat", "template line {}: {}", line, value.undefined_hint().empty() ? "undefined value used" : value.undefined_hint());
}

Value ArgReader::get(size_t position, std::string_view name, Value fallback) {
    for (const auto& [key, value] : args_.keyword) {
        if (key == name) {
            if (position < args_.positional.size())
                fail("chat", "template line {}: {}() got argument '{}' twice", args_.line, function_, name);
            keywords_used_.emplace_back(name);
            return value;
        }
    }
    if (position < args_.positional.size()) {
        positional_used_ = std::max(positional_used_, position + 1);
        return args_.positional[position];
    }
    return fallback;
}

bool ArgReader::has(size_t position, std::string_view name) const {
    if (position < args_.positional.size()) return true;
    for (const auto& [key, value] : args_.keyword)
        if (key == name) return true;
    return false;
}

void ArgReader::done() const {
    if (args_.positional.size() > positional_used_)
        fail("chat", "template line {}: {}() takes {} positional argument(s) but {} were given", args_.line, function_, positional_used_,
             args_.positional.size());
    for (const auto& [key, value] : args_.keyword)
        if (std::find(keywords_used_.begin(), keywords_used_.end(), key) == keywords_used_.end())
            fail("chat", "template line {}: {}() got an unexpected keyword argument '{}'", args_.line, function_, key);
}

namespace {

std::string object_name(const Value& v) {
    std::string name = v.type_name();
    name.insert(0, 1, '\'');
    return name += " object'";
}

int64_t index_of(const Value& v, std::string_view what, int line) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    fail("chat", "template line {}: {} must be an integer, not {}", line, what, v.type_name());
}

// The sandbox refuses the methods that change a value.
[[noreturn]] void fail_unsafe(const Value& object, const std::string& name, int line) {
    fail("chat", "template line {}: access to attribute '{}' of '{}' object is unsafe (the sandbox keeps values immutable)", line,
         name, object.type_name());
}

bool is_mutating_method(const Value& object, const std::string& name) {
    static const char* const list_methods[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
    static const char* const dict_methods[] = {"pop", "popitem", "update", "setdefault", "clear"};
    if (object.is_list() && !object.is_tuple() && !object.is_iterator())
        return std::any_of(std::begin(list_methods), std::end(list_methods), [&](const char* m) { return name == m; });
    if (object.is_dict() && !object.is_namespace())
        return std::any_of(std::begin(dict_methods), std::end(dict_methods), [&](const char* m) { return name == m; });
    return false;
}

Value string_method(const Value& object, const std::string& name) {
    const std::string text = object.as_string();
    const auto bind = [&](auto body) { return Value::function("str." + name, body); };
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        return bind([text, name](CallArgs& args) {
            ArgReader reader(args, name);
            const Value chars = reader.get(0, "chars", Value::none());
            reader.done();
            const bool left = name != "rstrip", right = name != "lstrip";
            return Value(python_strip(text, chars.is_none() ? nullptr : &chars.as_string(), left, right));
        });
    }
    if (name == "startswith" || name == "endswith") {
        return bind([text, name](CallArgs& args) {
            ArgReader reader(args, name);
            const Value affix = reader.get(0, "prefix");
            reader.done();
            std::vector<Value> options = affix.is_tuple() ? affix.items() : std::vector<Value>{affix};
            for (const Value& option : options) {
                if (!option.is_string())
                    fail("chat", "template line {}: {} needs a str or a tuple of str, not {}", args.line, name, option.type_name());
                const std::string& a = option.as_string();
                if (a.size() > text.size()) continue;
                if (name == "startswith" ? text.compare(0, a.size(), a) == 0 : text.compare(text.size() - a.size(), a.size(), a) == 0)
                    return Value(true);
            }
            return Value(false);
        });
    }
    if (name == "split" || name == "rsplit") {
        return bind([text, name](CallArgs& args) {
            ArgReader reader(args, name);
            const Value sep = reader.get(0, "sep", Value::none());
            const Value maxsplit = reader.get(1, "maxsplit", Value(-1));
            reader.done();
            if (!sep.is_none() && !sep.is_string()) fail("chat", "template line {}: split separator must be str or None", args.line);
            if (sep.is_string() && sep.as_string().empty()) fail("chat", "template line {}: split: empty separator", args.line);
            std::vector<std::string> parts = python_split(text, sep.is_none() ? nullptr : &sep.as_string(),
                                                          index_of(maxsplit, "maxsplit", args.line), name == "rsplit");
            ValueList items;
            for (auto& p : parts) items.emplace_back(std::move(p));
            return Value::list(std::move(items));
        });
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "splitlines" ||
        name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
        return bind([text, name](CallArgs& args) {
            ArgReader(args, name).done();
            if (name == "upper") return Value(python_upper(text));
            if (name == "lower") return Value(python_lower(text));
            if (name == "title") return Value(python_title(text));
            if (name == "capitalize") return Value(python_capitalize(text));
            if (name == "splitlines") {
                ValueList items;
                for (auto& line : python_splitlines(text)) items.emplace_back(std::move(line));
                return Value::list(std::move(items));
            }
            if (text.empty()) return Value(false);
            const auto all = [&](auto pred) { return Value(std::all_of(text.begin(), text.end(), pred)); };
            if (name == "isdigit") return all([](char c) { return c >= '0' && c <= '9'; });
            if (name == "isspace") return all([](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
            if (name == "isalpha") return all([](char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; });
            return all([](char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); });
        });
    }
    if (name == "replace") {
        return bind([text](CallArgs& args) {
            ArgReader reader(args, "replace");
            const Value old_text = reader.get(0, "old"), new_text = reader.get(1, "new"), count = reader.get(2, "count", Value(-1));
            reader.done();
            if (!old_text.is_string() || !new_text.is_string()) fail("chat", "template line {}: replace() needs str arguments", args.line);
            return Value(python_replace(text, old_text.as_string(), new_text.as_string(), index_of(count, "count", args.line)));
        });
    }
    if (name == "find" || name == "count") {
        return bind([text, name](CallArgs& args) {
            ArgReader reader(args, name);
            const Value sub = reader.get(0, "sub");
            reader.done();
            if (!sub.is_string()) fail("chat", "template line {}: {}() needs a str", args.line, name);
            if (name == "find") {
                const size_t at = text.find(sub.as_string());
                return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(text.substr(0, at))));
            }
            return Value(python_count(text, sub.as_string()));
        });
    }
    if (name == "join") {
        return bind([text](CallArgs& args) {
            ArgReader reader(args, "join");
            const Value items = reader.get(0, "iterable");
            reader.done();
            std::string out;
            bool first = true;
            for (const Value& item : iterate(items, args.line)) {
                if (!item.is_string()) fail("chat", "template line {}: str.join() needs str items, found {}", args.line, item.type_name());
                if (!first) out += text;
                first = false;
                out += item.as_string();
            }
            return Value(std::move(out));
        });
    }
    if (name == "format" || name == "format_map") {
        return bind([name](CallArgs& args) -> Value { fail("chat", "template line {}: str.{}() is not supported", args.line, name); });
    }
    return Value::undefined(object_name(object) + " has no attribute '" + name + "'");
}

Value dict_method(const Value& object, const std::string& name) {
    if (name == "items" || name == "keys" || name == "values") {
        return Value::function("dict." + name, [object, name](CallArgs& args) {
            ArgReader(args, name).done();
            ValueList out;
            for (const auto& [k, v] : object.entries().entries) {
                if (name == "items") out.push_back(Value::list({k, v}, true));
                else out.push_back(name == "keys" ? k : v);
            }
            return Value::iterator(std::move(out), "dict_" + name);
        });
    }
    if (name == "get") {
        return Value::function("dict.get", [object](CallArgs& args) {
            ArgReader reader(args, "get");
            const Value key = reader.get(0, "key"), fallback = reader.get(1, "default", Value::none());
            reader.done();
            const Value* found = object.entries().find(key);
            return found ? *found : fallback;
        });
    }
    return Value::undefined("");
}

Value list_method(const Value& object, const std::string& name) {
    if (name == "index" || name == "count") {
        return Value::function("list." + name, [object, name](CallArgs& args) {
            ArgReader reader(args, name);
            const Value needle = reader.get(0, "value");
            reader.done();
            int64_t count = 0;
            for (size_t i = 0; i < object.items().size(); ++i) {
                if (!object.items()[i].equals(needle)) continue;
                if (name == "index") return Value(static_cast<int64_t>(i));
                ++count;
            }
            if (name == "index") fail("chat", "template line {}: list.index(x): x not in list", args.line);
            return Value(count);
        });
    }
    return Value::undefined(object_name(object) + " has no attribute '" + name + "'");
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name, int line) {
    if (object.is_undefined()) fail_undefined(object, line);
    if (is_mutating_method(object, name)) {
        // Reading is allowed; calling is what the sandbox refuses.
        return Value::function(object.type_name() + "." + name, [object, name](CallArgs& args) -> Value { fail_unsafe(object, name, args.line); });
    }
    if (object.is_namespace()) {
        const Value* found = object.entries().find(name);
        return found ? *found : Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    if (object.is_dict()) {
        Value method = dict_method(object, name);
        if (!method.is_undefined()) return method;
        const Value* found = object.entries().find(name);
        return found ? *found : Value::undefined(object_name(object) + " has no attribute '" + name + "'");
    }
    if (object.is_string()) return string_method(object, name);
    if (object.is_list() && !object.is_iterator()) return list_method(object, name);
    return Value::undefined(object_name(object) + " has no attribute '" + name + "'");
}

Value get_item(const Value& object, const Value& key, int line) {
    if (object.is_undefined()) fail_undefined(object, line);
    if (object.is_dict()) {
        const Value* found = object.entries().find(key);
        if (found) return *found;
        if (key.is_string() && !object.is_namespace()) return get_attribute(object, key.as_string(), line);
        return Value::undefined(object_name(object) + " has no attribute " + key.repr());
    }
    if (((object.is_list() && !object.is_iterator()) || object.is_string()) && (key.is_int() || key.is_bool())) {
        int64_t i = key.as_int();
        if (object.is_list()) {
            const auto n = static_cast<int64_t>(object.items().size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) return Value::undefined(object_name(object) + " has no element " + key.repr());
            return object.items()[static_cast<size_t>(i)];
        }
        const std::vector<std::string> chars = utf8_code_points(object.as_string());
        const auto n = static_cast<int64_t>(chars.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(object_name(object) + " has no element " + key.repr());
        return Value(chars[static_cast<size_t>(i)]);
    }
    if (key.is_string()) return get_attribute(object, key.as_string(), line);
    return Value::undefined(object_name(object) + " has no element " + key.repr());
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step, int line) {
    if (object.is_undefined()) fail_undefined(object, line);
    if ((!object.is_list() && !object.is_string()) || object.is_iterator())
        fail("chat", "template line {}: '{}' object is not subscriptable", line, object.type_name());
    const bool is_text = object.is_string();
    const std::vector<std::string> chars = is_text ? utf8_code_points(object.as_string()) : std::vector<std::string>{};
    const auto n = static_cast<int64_t>(is_text ? chars.size() : object.items().size());
    const auto part = [&](const Value& v, std::string_view what) -> std::optional<int64_t> {
        if (v.is_none() || v.is_undefined()) return std::nullopt;
        return index_of(v, what, line);
    };
    const int64_t s = part(step, "slice step").value_or(1);
    if (s == 0) fail("chat", "template line {}: slice step cannot be zero", line);
    // Python's PySlice_AdjustIndices.
    const auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
        if (!v) return fallback;
        int64_t i = *v;
        if (i < 0) {
            i += n;
            if (i < 0) i = s < 0 ? -1 : 0;
        } else if (i >= n) {
            i = s < 0 ? n - 1 : n;
        }
        return i;
    };
    const int64_t first = adjust(part(start, "slice start"), s < 0 ? n - 1 : 0);
    const int64_t last = adjust(part(stop, "slice stop"), s < 0 ? -1 : n);
    std::string text;
    ValueList items;
    for (int64_t i = first; s > 0 ? i < last : i > last; i += s) {
        if (is_text) text += chars[static_cast<size_t>(i)];
        else items.push_back(object.items()[static_cast<size_t>(i)]);
    }
    if (is_text) return Value(std::move(text));
    return Value::list(std::move(items), object.is_tuple());
}

std::vector<Value> iterate(const Value& value, int line) {
    switch (value.kind()) {
        case Value::Kind::undefined: return {};
        case Value::Kind::list: return value.items();
        case Value::Kind::string: {
            std::vector<Value> out;
            for (auto& c : utf8_code_points(value.as_string())) out.emplace_back(std::move(c));
            return out;
        }
        case Value::Kind::dict: {
            if (value.is_namespace()) break;
            std::vector<Value> out;
            for (const auto& [k, v] : value.entries().entries) out.push_back(k);
            return out;
        }
        default: break;
    }
    fail("chat", "template line {}: '{}' object is not iterable", line, value.type_name());
}

bool python_less(const Value& a, const Value& b, int line) {
    if (a.is_undefined()) fail_undefined(a, line);
    if (b.is_undefined()) fail_undefined(b, line);
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 byte order is code point order
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!x[i].equals(y[i])) return python_less(x[i], y[i], line);
        }
        return x.size() < y.size();
    }
    fail("chat", "template line {}: '<' not supported between instances of '{}' and '{}'", line, a.type_name(), b.type_name());
}

bool python_contains(const Value& haystack, const Value& needle, int line) {
    if (haystack.is_string()) {
        if (!needle.is_string())
            fail("chat", "template line {}: 'in <string>' requires string as left operand, not {}", line, needle.type_name());
        return haystack.as_string().find(needle.as_string()) != std::string::npos;
    }
    if (haystack.is_dict() && !haystack.is_namespace()) return haystack.entries().find(needle) != nullptr;
    if (haystack.is_list()) {
        return std::any_of(haystack.items().begin(), haystack.items().end(), [&](const Value& v) { return v.equals(needle); });
    }
    if (haystack.is_undefined()) return false;  // an undefined value iterates as empty
    fail("chat", "template line {}: argument of type '{}' is not iterable", line, haystack.type_name());
}

}  // namespace kiln::chat
