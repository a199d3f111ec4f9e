// jinja2's filters and tests that chat templates use, with Hugging Face's
// tojson (json.dumps without ASCII escaping) in place of jinja2's own.
#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/core/error.h"
#include "formats/chat/template_builtins.h"
#include "formats/chat/template_text.h"

namespace kiln::chat {

namespace {

const char* const filter_names[] = {"abs",     "attr",    "capitalize", "count",   "d",      "default", "dictsort", "e",
                                    "escape",  "first",   "float",      "indent",  "int",    "items",   "join",     "last",
                                    "length",  "list",    "lower",      "map",     "max",    "min",     "reject",   "rejectattr",
                                    "replace", "reverse", "round",      "safe",    "select", "selectattr", "sort",  "string",
                                    "sum",     "title",   "tojson",     "trim",    "unique", "upper"};
const char* const test_names[] = {"boolean", "callable", "defined", "divisibleby", "eq",      "equalto", "escaped", "even",
                                  "false",   "float",    "ge",      "gt",          "in",      "integer", "iterable", "le",
                                  "lower",   "lt",       "mapping", "ne",          "none",    "number",  "odd",     "sameas",
                                  "sequence", "string",  "true",    "undefined",   "upper",   "==",      "!=",      "<",
                                  "<=",      ">",        ">="};

int64_t need_int(const Value& v, std::string_view what, int line) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    fail("chat", "template line {}: {} needs an integer, not {}", line, what, v.type_name());
}

const std::string& need_string(const Value& v, std::string_view what, int line) {
    if (v.is_string()) return v.as_string();
    fail("chat", "template line {}: {} needs a string, not {}", line, what, v.type_name());
}

// jinja2's attribute paths for sort/map/selectattr: "a.b.0".
Value attribute_path(const Value& item, const std::string& path, int line) {
    Value v = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        int64_t index = 0;
        const auto parsed = std::from_chars(part.data(), part.data() + part.size(), index);
        if (parsed.ec == std::errc() && parsed.ptr == part.data() + part.size()) v = get_item(v, Value(index), line);
        else v = get_item(v, Value(part), line);
        if (dot == std::string::npos) return v;
        start = dot + 1;
    }
}

// Python's str.lower() on strings for the case-insensitive sort and unique.
Value fold_case(const Value& v, bool case_sensitive) {
    return !case_sensitive && v.is_string() ? Value(python_lower(v.as_string())) : v;
}

// The optional test and its arguments of select/reject (from `first` on).
bool run_test(const Value& item, CallArgs& args, size_t first, int line) {
    if (args.positional.size() <= first) return item.truthy();
    const Value& name = args.positional[first];
    CallArgs test_args;
    test_args.line = line;
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1, args.positional.end());
    return apply_test(need_string(name, "the test name", line), item, test_args);
}

std::string indent_text(const std::string& text, const std::string& indention, bool first, bool blank) {
    // jinja2 adds a newline first so that splitlines() keeps a trailing empty line.
    const std::vector<std::string> lines = python_splitlines(text + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += "\n";
            if (blank || !lines[i].empty()) out += indention;
        }
        out += lines[i];
    }
    if (first) out = indention + out;
    return out;
}

double python_round(double value, int64_t digits) {
    const double scale = std::pow(10.0, static_cast<double>(digits));
    const double scaled = value * scale;
    double rounded = std::nearbyint(scaled);  // half to even, as Python's round()
    return rounded / scale;
}

Value to_number(const Value& input, bool want_float, const Value& fallback) {
    if (input.is_bool() || input.is_int()) return want_float ? Value(static_cast<double>(input.as_int())) : Value(input.as_int());
    if (input.is_float()) {
        if (want_float) return input;
        if (!std::isfinite(input.as_float())) return fallback;
        return Value(static_cast<int64_t>(std::trunc(input.as_float())));
    }
    if (!input.is_string()) return fallback;
    std::string text = python_strip(input.as_string(), nullptr, true, true);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    int64_t i = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), i);
    if (!text.empty() && r.ec == std::errc() && r.ptr == text.data() + text.size())
        return want_float ? Value(static_cast<double>(i)) : Value(i);
    double f = 0;
    auto rf = std::from_chars(text.data(), text.data() + text.size(), f);
    if (text.empty() || rf.ec != std::errc() || rf.ptr != text.data() + text.size()) return fallback;
    if (want_float) return Value(f);
    if (!std::isfinite(f)) return fallback;
    return Value(static_cast<int64_t>(std::trunc(f)));
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool case_sensitive, const Value& attribute, int line) {
    const auto key = [&](const Value& v) {
        return fold_case(attribute.is_none() || attribute.is_undefined() ? v : attribute_path(v, attribute.str(), line), case_sensitive);
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? python_less(key(b), key(a), line) : python_less(key(a), key(b), line);
    });
    return items;
}

}  // namespace

bool is_known_filter(std::string_view name) {
    return std::any_of(std::begin(filter_names), std::end(filter_names), [&](const char* n) { return name == n; });
}

bool is_known_test(std::string_view name) {
    return std::any_of(std::begin(test_names), std::end(test_names), [&](const char* n) { return name == n; });
}

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
    const int line = args.line;
    ArgReader reader(args, name);
    const auto result = [&](Value v) {
        reader.done();
        return v;
    };
    if (name == "default" || name == "d") {
        const Value fallback = reader.get(0, "default_value", Value(""));
        const bool boolean = reader.get(1, "boolean", Value(false)).truthy();
        return result(input.is_undefined() || (boolean && !input.truthy()) ? fallback : input);
    }
    if (name == "length" || name == "count") {
        reader.done();
        if (input.is_string()) return Value(static_cast<int64_t>(utf8_length(input.as_string())));
        if (input.is_list() && !input.is_lazy()) return Value(static_cast<int64_t>(input.items().size()));
        if (input.is_dict()) return Value(static_cast<int64_t>(input.entries().entries.size()));
        if (input.is_undefined()) return Value(int64_t{0});
        fail("chat", "template line {}: object of type '{}' has no len()", line, input.type_name());
    }
    if (name == "tojson") {
        const Value indent = reader.get(1, "indent", Value::none());
        reader.get(0, "ensure_ascii");  // Hugging Face's signature; ASCII escaping is never used
        reader.done();
        std::optional<std::string> indention;
        if (indent.is_string()) indention = indent.as_string();
        else if (!indent.is_none()) indention = std::string(static_cast<size_t>(std::max<int64_t>(0, need_int(indent, "tojson indent", line))), ' ');
        std::optional<std::string> json = input.to_json(indention);
        if (!json) fail("chat", "template line {}: tojson: Object of type {} is not JSON serializable", line, input.type_name());
        return Value(std::move(*json));
    }
    if (input.is_undefined() && name != "list" && name != "join" && name != "string" && name != "trim" && name != "upper" &&
        name != "lower" && name != "items" && name != "first" && name != "last" && name != "safe" && name != "e" &&
        name != "escape" && name != "title" && name != "capitalize" && name != "indent" && name != "replace") {
        fail_undefined(input, line);
    }
    if (name == "string") return result(input.is_string() ? input : Value(input.str()));
    if (name == "safe") return result(Value::markup(input.str()));
    if (name == "trim") {
        const Value chars = reader.get(0, "chars", Value::none());
        return result(Value(python_strip(input.str(), chars.is_none() ? nullptr : &need_string(chars, "trim", line), true, true)));
    }
    if (name == "upper") return result(Value(python_upper(input.str())));
    if (name == "lower") return result(Value(python_lower(input.str())));
    if (name == "title") return result(Value(python_title(input.str())));
    if (name == "capitalize") return result(Value(python_capitalize(input.str())));
    if (name == "e" || name == "escape") return result(input.is_markup() ? input : Value::markup(html_escape(input.str())));
    if (name == "replace") {
        const Value old_text = reader.get(0, "old"), new_text = reader.get(1, "new"), count = reader.get(2, "count", Value::none());
        reader.done();
        return Value(python_replace(input.str(), need_string(old_text, "replace", line).c_str(), new_text.str(),
                                   count.is_none() ? -1 : need_int(count, "replace count", line)));
    }
    if (name == "indent") {
        const Value width = reader.get(0, "width", Value(4));
        const bool first = reader.get(1, "first", Value(false)).truthy();
        const bool blank = reader.get(2, "blank", Value(false)).truthy();
        reader.done();
        const std::string indention =
            width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, need_int(width, "indent width", line))), ' ');
        return Value(indent_text(input.str(), indention, first, blank));
    }
    if (name == "join") {
        const Value separator = reader.get(0, "d", Value(""));
        const Value attribute = reader.get(1, "attribute", Value::none());
        reader.done();
        std::string out;
        bool first = true;
        for (const Value& item : iterate(input, line)) {
            if (!first) out += separator.str();
            first = false;
            out += (attribute.is_none() ? item : attribute_path(item, attribute.str(), line)).str();
        }
        return Value(std::move(out));
    }
    if (name == "items") {
        reader.done();
        if (input.is_undefined()) return Value::list({});
        if (!input.is_dict() || input.is_namespace()) fail("chat", "template line {}: items: can only get item pairs from a mapping", line);
        ValueList out;
        for (const auto& [k, v] : input.entries().entries) out.push_back(Value::list({k, v}, true));
        return Value::iterator(std::move(out), "generator");
    }
    if (name == "dictsort") {
        const bool case_sensitive = reader.get(0, "case_sensitive", Value(false)).truthy();
        const std::string by = reader.get(1, "by", Value("key")).str();
        const bool reverse = reader.get(2, "reverse", Value(false)).truthy();
        reader.done();
        if (!input.is_dict()) fail("chat", "template line {}: dictsort needs a mapping", line);
        ValueList pairs;
        for (const auto& [k, v] : input.entries().entries) pairs.push_back(Value::list({k, v}, true));
        const Value position(by == "value" ? 1 : 0);
        std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
            const Value x = fold_case(get_item(a, position, line), case_sensitive), y = fold_case(get_item(b, position, line), case_sensitive);
            return reverse ? python_less(y, x, line) : python_less(x, y, line);
        });
        return Value::list(std::move(pairs));
    }
    if (name == "list") return result(Value::list(iterate(input, line)));
    if (name == "first" || name == "last") {
        reader.done();
        if (name == "last" && input.is_lazy()) fail("chat", "template line {}: last: '{}' object is not reversible", line, input.type_name());
        const std::vector<Value> items = iterate(input, line);
        if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
        return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
        reader.done();
        if (input.is_string()) {
            std::vector<std::string> cps = utf8_code_points(input.as_string());
            std::string out;
            for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
            return Value(std::move(out));
        }
        if (input.is_lazy()) fail("chat", "template line {}: reverse: '{}' object is not reversible", line, input.type_name());
        std::vector<Value> items = iterate(input, line);
        std::reverse(items.begin(), items.end());
        // reversed() of a list is an iterator; of a dict or view, jinja2 builds a list.
        if (input.is_list() && !input.is_iterator()) return Value::iterator(std::move(items), "list_reverseiterator");
        return Value::list(std::move(items));
    }
    if (name == "sort") {
        const bool reverse = reader.get(0, "reverse", Value(false)).truthy();
        const bool case_sensitive = reader.get(1, "case_sensitive", Value(false)).truthy();
        const Value attribute = reader.get(2, "attribute", Value::none());
        reader.done();
        return Value::list(sorted(iterate(input, line), reverse, case_sensitive, attribute, line));
    }
    if (name == "min" || name == "max") {
        const bool case_sensitive = reader.get(0, "case_sensitive", Value(false)).truthy();
        const Value attribute = reader.get(1, "attribute", Value::none());
        reader.done();
        std::vector<Value> items = sorted(iterate(input, line), name == "max", case_sensitive, attribute, line);
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        return items.front();
    }
    if (name == "unique") {
        const bool case_sensitive = reader.get(0, "case_sensitive", Value(false)).truthy();
        const Value attribute = reader.get(1, "attribute", Value::none());
        reader.done();
        ValueList out, seen;
        for (const Value& item : iterate(input, line)) {
            const Value key = fold_case(attribute.is_none() ? item : attribute_path(item, attribute.str(), line), case_sensitive);
            if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) continue;
            seen.push_back(key);
            out.push_back(item);
        }
        return Value::iterator(std::move(out), "generator");
    }
    if (name == "sum") {
        const Value attribute = reader.get(0, "attribute", Value::none());
        const Value start = reader.get(1, "start", Value(int64_t{0}));
        reader.done();
        Value total = start;
        for (const Value& item : iterate(input, line)) {
            const Value v = attribute.is_none() ? item : attribute_path(item, attribute.str(), line);
            if (!v.is_number() || !total.is_number()) fail("chat", "template line {}: sum needs numbers, found {}", line, v.type_name());
            if (v.is_float() || total.is_float()) total = Value(total.as_float() + v.as_float());
            else total = Value(total.as_int() + v.as_int());
        }
        return total;
    }
    if (name == "int" || name == "float") {
        const Value fallback = reader.get(0, "default", name == "int" ? Value(int64_t{0}) : Value(0.0));
        if (name == "int") reader.get(1, "base");
        reader.done();
        return to_number(input, name == "float", fallback);
    }
    if (name == "abs") {
        reader.done();
        if (input.is_float()) return Value(std::fabs(input.as_float()));
        if (input.is_number()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
        fail("chat", "template line {}: bad operand type for abs(): '{}'", line, input.type_name());
    }
    if (name == "round") {
        const int64_t precision = need_int(reader.get(0, "precision", Value(int64_t{0})), "round precision", line);
        const std::string method = reader.get(1, "method", Value("common")).str();
        reader.done();
        if (!input.is_number()) fail("chat", "template line {}: round needs a number, not {}", line, input.type_name());
        if (method == "common" && !input.is_float()) return Value(input.as_int());  // Python's round() keeps an int an int
        const double scale = std::pow(10.0, static_cast<double>(precision));
        if (method == "common") return Value(python_round(input.as_float(), precision));
        if (method == "floor") return Value(std::floor(input.as_float() * scale) / scale);
        if (method == "ceil") return Value(std::ceil(input.as_float() * scale) / scale);
        fail("chat", "template line {}: round method must be 'common', 'ceil' or 'floor'", line);
    }
    if (name == "attr") {
        const Value attribute = reader.get(0, "name");
        reader.done();
        return get_attribute(input, need_string(attribute, "attr", line), line);
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
        // Arguments are read positionally: [attribute,] [test, test arguments...].
        const bool by_attribute = name.size() > 6;
        const bool keep = name.rfind("select", 0) == 0;
        if (!args.keyword.empty()) fail("chat", "template line {}: {} takes no keyword arguments", line, name);
        if (by_attribute && args.positional.empty()) fail("chat", "template line {}: {} needs an attribute", line, name);
        ValueList out;
        if (!input.truthy()) return Value::iterator({}, "generator");  // jinja2 walks only a true value
        for (const Value& item : iterate(input, line)) {
            const Value subject = by_attribute ? attribute_path(item, need_string(args.positional[0], name, line), line) : item;
            if (run_test(subject, args, by_attribute ? 1 : 0, line) == keep) out.push_back(item);
        }
        return Value::iterator(std::move(out), "generator");
    }
    if (name == "map") {
        ValueList out;
        const std::vector<Value> items = input.truthy() ? iterate(input, line) : std::vector<Value>{};
        if (args.positional.empty()) {
            const Value attribute = reader.get(99, "attribute");
            const Value fallback = reader.get(99, "default");
            reader.done();
            if (!attribute.is_string()) fail("chat", "template line {}: map needs a filter name or attribute=", line);
            for (const Value& item : items) {
                Value v = attribute_path(item, attribute.as_string(), line);
                out.push_back(v.is_undefined() && reader.has(99, "default") ? fallback : v);
            }
        } else {
            const std::string filter = need_string(args.positional[0], "map", line);
            if (!is_known_filter(filter)) fail("chat", "template line {}: map: no filter named '{}'", line, filter);
            for (const Value& item : items) {
                CallArgs filter_args;
                filter_args.line = line;
                filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
                filter_args.keyword = args.keyword;
                out.push_back(apply_filter(filter, item, filter_args));
            }
        }
        return Value::iterator(std::move(out), "generator");
    }
    fail("chat", "template line {}: no filter named '{}'", line, name);
}

bool apply_test(const std::string& name, const Value& input, CallArgs& args) {
    const int line = args.line;
    ArgReader reader(args, name);
    const auto result = [&](bool v) {
        reader.done();
        return v;
    };
    if (name == "defined") return result(!input.is_undefined());
    if (name == "undefined") return result(input.is_undefined());
    if (name == "none") return result(input.is_none());
    if (name == "boolean") return result(input.is_bool());
    if (name == "true") return result(input.is_bool() && input.as_bool());
    if (name == "false") return result(input.is_bool() && !input.as_bool());
    if (name == "integer") return result(input.is_int());
    if (name == "float") return result(input.is_float());
    if (name == "number") return result(input.is_number());
    if (name == "string") return result(input.is_string());
    if (name == "mapping") return result(input.is_dict() && !input.is_namespace());
    if (name == "iterable") return result(input.is_list() || input.is_string() || (input.is_dict() && !input.is_namespace()) || input.is_undefined());
    if (name == "sequence") return result((input.is_list() && !input.is_iterator()) || input.is_string() || (input.is_dict() && !input.is_namespace()) || input.is_undefined());
    if (name == "callable") return result(input.is_callable());
    if (name == "escaped") return result(false);
    if (name == "lower") return result(input.is_string() && python_lower(input.as_string()) == input.as_string());
    if (name == "upper") return result(input.is_string() && python_upper(input.as_string()) == input.as_string());
    if (name == "even" || name == "odd") {
        reader.done();
        if (input.is_undefined()) fail_undefined(input, line);
        const int64_t v = need_int(input, name, line);
        return (v % 2 == 0) == (name == "even");
    }
    if (name == "divisibleby") {
        const int64_t d = need_int(reader.get(0, "num"), "divisibleby", line);
        reader.done();
        if (d == 0) fail("chat", "template line {}: divisibleby 0", line);
        return need_int(input, "divisibleby", line) % d == 0;
    }
    const Value other = reader.get(0, "other");
    reader.done();
    if (name == "eq" || name == "equalto" || name == "==") return input.equals(other);
    if (name == "ne" || name == "!=") return !input.equals(other);
    if (name == "sameas") {
        if (input.is_number() != other.is_number() || input.kind() != other.kind()) return false;
        return input.is_list() || input.is_dict() ? input.equals(other) : input.equals(other);
    }
    if (name == "lt" || name == "<") return python_less(input, other, line);
    if (name == "gt" || name == ">") return python_less(other, input, line);
    if (name == "le" || name == "<=") return !python_less(other, input, line);
    if (name == "ge" || name == ">=") return !python_less(input, other, line);
    if (name == "in") return python_contains(other, input, line);
    fail("chat", "template line {}: no test named '{}'", line, name);
}

}  // namespace kiln::chat
