#include "formats/checkpoint/json_limits.h"

#include "engine/core/error.h"

namespace kiln {

using nlohmann::json;

size_t json_nesting_depth(std::string_view text, size_t limit) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return deepest;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

json parse_json_bounded(std::string_view text, std::string_view component, const std::string& where,
                        const json::parser_callback_t& callback) {
    if (json_nesting_depth(text) > kMaxJsonDepth)
        fail(component, "{}: the JSON nests arrays or objects more than {} levels deep", where, kMaxJsonDepth);
    try {
        return json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
        fail(component, "{}: not valid JSON: {}", where, e.what());
    }
}

namespace {

// Appends `v` to `out` until `out` passes `budget` characters; `depth` keeps a
// value built in memory (not parsed through the limit above) from recursing deeply.
void append_excerpt(const json& v, std::string& out, size_t budget, size_t depth) {
    if (out.size() > budget) return;
    if (depth > kMaxJsonDepth) {
        out += "...";
        return;
    }
    if (v.is_string()) {
        // Only the start of a long string is escaped; the dump replaces invalid UTF-8.
        const std::string& s = v.get_ref<const std::string&>();
        out += json(s.substr(0, budget + 1)).dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (v.is_array()) {
        out += '[';
        bool first = true;
        for (const json& item : v) {
            if (out.size() > budget) return;
            if (!first) out += ", ";
            first = false;
            append_excerpt(item, out, budget, depth + 1);
        }
        out += ']';
    } else if (v.is_object()) {
        out += '{';
        bool first = true;
        for (const auto& [key, item] : v.items()) {
            if (out.size() > budget) return;
            if (!first) out += ", ";
            first = false;
            append_excerpt(json(key.substr(0, budget + 1)), out, budget, depth + 1);
            out += ": ";
            append_excerpt(item, out, budget, depth + 1);
        }
        out += '}';
    } else {
        out += v.dump();
    }
}

}  // namespace

std::string json_excerpt(const json& value, size_t max_chars) {
    std::string out;
    append_excerpt(value, out, max_chars, 0);
    if (out.size() <= max_chars) return out;
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0u) == 0x80u) --cut;  // a UTF-8 boundary
    out.resize(cut);
    return out + "...";
}

}  // namespace kiln
