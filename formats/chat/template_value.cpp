#include "formats/chat/template_value.h"

#include "engine/core/error.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kiln::chat {

namespace {

// Decodes the code point at text[i], advancing i; invalid bytes count as themselves.
uint32_t next_code_point(std::string_view text, size_t& i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int extra = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : byte >= 0xC0 ? 1 : 0;
    uint32_t cp = extra == 3 ? byte & 0x07 : extra == 2 ? byte & 0x0F : extra == 1 ? byte & 0x1F : byte;
    ++i;
    while (extra-- > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) {
        cp = (cp << 6) | (static_cast<unsigned char>(text[i]) & 0x3F);
        ++i;
    }
    return cp;
}

// The characters Python's repr() escapes beyond ASCII controls: separators,
// format characters and C1 controls (str.isprintable() is false for them).
bool python_unprintable(uint32_t cp) {
    return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || (cp >= 0x2000 && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF;
}

std::string python_string_repr(std::string_view text) {
    const bool has_single = text.find('\'') != std::string_view::npos;
    const bool has_double = text.find('"') != std::string_view::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (size_t i = 0; i < text.size();) {
        const size_t start = i;
        const uint32_t cp = next_code_point(text, i);
        if (cp == '\\') out += "\\\\";
        else if (cp == static_cast<uint32_t>(quote)) (out += '\\') += quote;
        else if (cp == '\n') out += "\\n";
        else if (cp == '\r') out += "\\r";
        else if (cp == '\t') out += "\\t";
        else if (python_unprintable(cp)) {
            char buffer[16];
            if (cp < 0x100) std::snprintf(buffer, sizeof buffer, "\\x%02x", cp);
            else std::snprintf(buffer, sizeof buffer, "\\u%04x", cp);
            out += buffer;
        } else {
            out.append(text.substr(start, i - start));
        }
    }
    out += quote;
    return out;
}

void json_string(std::string& out, std::string_view text) {
    out += '"';
    for (char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buffer[8];
                    std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
                    out += buffer;
                } else {
                    out += c;
                }
        }
    }
    out += '"';
}

std::string json_float(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
    return python_float_repr(value);
}

}  // namespace

std::string python_float_repr(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    const std::string sci(buffer, result.ptr);  // "-1.2345e+02"
    const size_t e = sci.find('e');
    std::string mantissa = sci.substr(0, e);
    const int exponent = std::stoi(sci.substr(e + 1));
    const bool negative = mantissa[0] == '-';
    if (negative) mantissa.erase(0, 1);
    std::string digits;
    for (char c : mantissa)
        if (c != '.') digits += c;
    std::string out = negative ? "-" : "";
    // repr uses positional notation for exponents in [-4, 16).
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) {
            (out += "0.").append(static_cast<size_t>(-exponent - 1), '0') += digits;
        } else if (static_cast<int>(digits.size()) <= exponent + 1) {
            out += digits + std::string(static_cast<size_t>(exponent + 1 - static_cast<int>(digits.size())), '0') + ".0";
        } else {
            ((out += digits.substr(0, static_cast<size_t>(exponent + 1))) += '.') += digits.substr(static_cast<size_t>(exponent + 1));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) (out += '.') += digits.substr(1);
    char exp_buffer[16];
    std::snprintf(exp_buffer, sizeof exp_buffer, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buffer;
}

size_t utf8_length(std::string_view text) {
    size_t n = 0;
    for (size_t i = 0; i < text.size();) {
        next_code_point(text, i);
        ++n;
    }
    return n;
}

std::vector<std::string> utf8_code_points(std::string_view text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size();) {
        const size_t start = i;
        next_code_point(text, i);
        out.emplace_back(text.substr(start, i - start));
    }
    return out;
}

const Value* ValueDict::find(const Value& key) const {
    for (const auto& [k, v] : entries)
        if (k.equals(key)) return &v;
    return nullptr;
}

const Value* ValueDict::find(std::string_view key) const {
    for (const auto& [k, v] : entries)
        if (k.is_string() && k.as_string() == key) return &v;
    return nullptr;
}

void ValueDict::set(Value key, Value value) {
    for (auto& [k, v] : entries) {
        if (k.equals(key)) {
            v = std::move(value);
            return;
        }
    }
    entries.emplace_back(std::move(key), std::move(value));
}

Value Value::list(ValueList items, bool tuple) {
    Value v(Kind::list);
    for (const Value& item : items) {
        v.nesting_ = std::max(v.nesting_, item.nesting_ + 1);
        v.footprint_ += item.footprint_ + sizeof(Value);
    }
    if (items.empty()) v.nesting_ = 1;
    v.list_ = std::make_shared<ValueList>(std::move(items));
    v.tuple_ = tuple;
    return v;
}

Value Value::iterator(ValueList items, std::string python_type) {
    Value v = list(std::move(items));
    v.text_ = std::move(python_type);
    return v;
}

Value Value::dict(ValueDict entries) {
    Value v(Kind::dict);
    v.nesting_ = 1;
    for (const auto& [key, item] : entries.entries) {
        v.nesting_ = std::max({v.nesting_, key.nesting_ + 1, item.nesting_ + 1});
        v.footprint_ += key.footprint_ + item.footprint_ + 2 * sizeof(Value);
    }
    v.dict_ = std::make_shared<ValueDict>(std::move(entries));
    return v;
}

Value Value::namespace_object(ValueDict entries) {
    Value v = dict(std::move(entries));
    v.namespace_ = true;
    return v;
}

Value Value::function(std::string name, std::function<Value(CallArgs&)> call) {
    Value v(Kind::callable);
    v.callable_ = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
    return v;
}

Value Value::from_json(const nlohmann::ordered_json& json) { return from_json(json, 0); }

Value Value::from_json(const nlohmann::ordered_json& json, int depth) {
    // Deeper JSON than any conversation needs would only exhaust the stack.
    if (depth > 512) fail("chat", "the conversation JSON is nested deeper than 512 levels");
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null: return none();
        case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(json.get<uint64_t>()));
        case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            ValueList items;
            for (const auto& item : json) items.push_back(from_json(item, depth + 1));
            return list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            ValueDict entries;
            for (const auto& [key, item] : json.items()) entries.entries.emplace_back(Value(key), from_json(item, depth + 1));
            return dict(std::move(entries));
        }
        default: return Value();  // binary and discarded values have no template form
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::undefined:
        case Kind::none: return false;
        case Kind::boolean:
        case Kind::integer: return int_ != 0;
        case Kind::floating: return float_ != 0;
        case Kind::string: return !text_.empty();
        case Kind::list: return is_lazy() || !list_->empty();
        case Kind::dict: return namespace_ || !dict_->entries.empty();
        case Kind::callable: return true;
    }
    return false;
}

std::string Value::str() const {
    switch (kind_) {
        case Kind::undefined: return "";
        case Kind::string: return text_;
        default: return repr();
    }
}

std::string Value::repr() const {
    switch (kind_) {
        case Kind::undefined: return "";
        case Kind::none: return "None";
        case Kind::boolean: return int_ ? "True" : "False";
        case Kind::integer: return std::to_string(int_);
        case Kind::floating: return python_float_repr(float_);
        case Kind::string: return python_string_repr(text_);
        case Kind::list: {
            if (is_lazy()) return "<" + text_ + " object>";
            std::string out = is_iterator() ? text_ + "([" : tuple_ ? "(" : "[";
            for (size_t i = 0; i < list_->size(); ++i) {
                if (i) out += ", ";
                out += (*list_)[i].repr();
            }
            if (tuple_ && list_->size() == 1) out += ",";
            return out + (is_iterator() ? "])" : tuple_ ? ")" : "]");
        }
        case Kind::dict: {
            std::string out = namespace_ ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, v] : dict_->entries) {
                if (!first) out += ", ";
                first = false;
                out += k.repr() + ": " + v.repr();
            }
            return out + (namespace_ ? "}>" : "}");
        }
        case Kind::callable: return "<function " + callable_->name + ">";
    }
    return "";
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::undefined: return "Undefined";
        case Kind::none: return "NoneType";
        case Kind::boolean: return "bool";
        case Kind::integer: return "int";
        case Kind::floating: return "float";
        case Kind::string: return "str";
        case Kind::list: return is_iterator() ? text_ : tuple_ ? "tuple" : "list";
        case Kind::dict: return namespace_ ? "Namespace" : "dict";
        case Kind::callable: return "function";
    }
    return "?";
}

bool Value::equals(const Value& other) const {
    if (is_number() && other.is_number()) {
        if (is_float() || other.is_float()) return as_float() == other.as_float();
        return int_ == other.int_;
    }
    if (kind_ != other.kind_) return false;
    switch (kind_) {
        case Kind::undefined:
        case Kind::none: return true;
        case Kind::string: return text_ == other.text_;
        case Kind::list: {
            if (is_iterator() || other.is_iterator()) return list_ == other.list_;
            if (tuple_ != other.tuple_ || list_->size() != other.list_->size()) return false;
            for (size_t i = 0; i < list_->size(); ++i)
                if (!(*list_)[i].equals((*other.list_)[i])) return false;
            return true;
        }
        case Kind::dict: {
            if (namespace_ || other.namespace_) return dict_ == other.dict_;
            if (dict_->entries.size() != other.dict_->entries.size()) return false;
            for (const auto& [k, v] : dict_->entries) {
                const Value* found = other.dict_->find(k);
                if (!found || !found->equals(v)) return false;
            }
            return true;
        }
        case Kind::callable: return callable_ == other.callable_;
        default: return false;
    }
}

std::optional<std::string> Value::to_json(std::optional<std::string> indent) const {
    std::string out;
    bool ok = true;
    dump_json(out, indent, 0, ok);
    if (!ok) return std::nullopt;
    return out;
}

void Value::dump_json(std::string& out, const std::optional<std::string>& indent, int depth, bool& ok) const {
    // json.dumps separates items by ", " without an indent and by "," plus a newline with one.
    const auto newline = [&](int level) {
        out += '\n';
        for (int i = 0; i < level; ++i) out += *indent;
    };
    switch (kind_) {
        case Kind::none: out += "null"; return;
        case Kind::boolean: out += int_ ? "true" : "false"; return;
        case Kind::integer: out += std::to_string(int_); return;
        case Kind::floating: out += json_float(float_); return;
        case Kind::string: json_string(out, text_); return;
        case Kind::list: {
            if (is_iterator()) break;
            if (list_->empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < list_->size(); ++i) {
                if (i) out += indent ? "," : ", ";
                if (indent) newline(depth + 1);
                (*list_)[i].dump_json(out, indent, depth + 1, ok);
            }
            if (indent) newline(depth);
            out += ']';
            return;
        }
        case Kind::dict: {
            if (namespace_) break;
            if (dict_->entries.empty()) {
                out += "{}";
                return;
            }
            out += '{';
            bool first = true;
            for (const auto& [k, v] : dict_->entries) {
                if (!first) out += indent ? "," : ", ";
                first = false;
                if (indent) newline(depth + 1);
                // json.dumps turns keys of other types into strings; others fail.
                if (k.is_string()) json_string(out, k.text_);
                else if (k.is_bool() || k.is_none()) ((out += '"') += k.is_none() ? "null" : k.int_ ? "true" : "false") += '"';
                else if (k.is_int()) ((out += '"') += std::to_string(k.int_)) += '"';
                else if (k.is_float()) ((out += '"') += json_float(k.float_)) += '"';
                else ok = false;
                out += ": ";
                v.dump_json(out, indent, depth + 1, ok);
            }
            if (indent) newline(depth);
            out += '}';
            return;
        }
        default: break;
    }
    ok = false;
}

}  // namespace kiln::chat
