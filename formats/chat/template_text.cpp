#include "formats/chat/template_text.h"

#include "formats/chat/template_value.h"

namespace kiln::chat {

namespace {

// Python's str.isspace() for ASCII; the separators 0x1c-0x1f count too.
bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }
bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char to_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

}  // namespace

std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right) {
    if (!chars) {
        size_t begin = 0, end = text.size();
        if (left)
            while (begin < end && is_python_space(text[begin])) ++begin;
        if (right)
            while (end > begin && is_python_space(text[end - 1])) --end;
        return std::string(text.substr(begin, end - begin));
    }
    const std::vector<std::string> strip_set = utf8_code_points(*chars);
    const std::vector<std::string> cps = utf8_code_points(text);
    const auto in_set = [&](const std::string& cp) {
        for (const auto& s : strip_set)
            if (s == cp) return true;
        return false;
    };
    size_t begin = 0, end = cps.size();
    if (left)
        while (begin < end && in_set(cps[begin])) ++begin;
    if (right)
        while (end > begin && in_set(cps[end - 1])) --end;
    std::string out;
    for (size_t i = begin; i < end; ++i) out += cps[i];
    return out;
}

std::vector<std::string> python_split(std::string_view text, const std::string* separator, int64_t max_split, bool from_right) {
    std::vector<std::string> parts;
    if (max_split < 0) max_split = INT64_MAX;
    if (separator) {
        const std::string& sep = *separator;
        if (!from_right) {
            size_t start = 0;
            while (max_split-- > 0) {
                const size_t at = text.find(sep, start);
                if (at == std::string_view::npos) break;
                parts.emplace_back(text.substr(start, at - start));
                start = at + sep.size();
            }
            parts.emplace_back(text.substr(start));
        } else {
            size_t end = text.size();
            while (max_split-- > 0 && end >= sep.size()) {
                const size_t at = text.rfind(sep, end - sep.size());
                if (at == std::string_view::npos) break;
                parts.insert(parts.begin(), std::string(text.substr(at + sep.size(), end - at - sep.size())));
                end = at;
            }
            parts.insert(parts.begin(), std::string(text.substr(0, end)));
        }
        return parts;
    }
    // On whitespace: runs separate, ends are dropped, no empty parts.
    if (!from_right) {
        size_t i = 0;
        while (true) {
            while (i < text.size() && is_python_space(text[i])) ++i;
            if (i >= text.size()) break;
            if (max_split-- <= 0) {
                size_t end = text.size();
                while (end > i && is_python_space(text[end - 1])) --end;
                parts.emplace_back(text.substr(i, end - i));
                break;
            }
            size_t j = i;
            while (j < text.size() && !is_python_space(text[j])) ++j;
            parts.emplace_back(text.substr(i, j - i));
            i = j;
        }
    } else {
        size_t end = text.size();
        while (true) {
            while (end > 0 && is_python_space(text[end - 1])) --end;
            if (end == 0) break;
            if (max_split-- <= 0) {
                size_t begin = 0;
                while (begin < end && is_python_space(text[begin])) ++begin;
                parts.insert(parts.begin(), std::string(text.substr(begin, end - begin)));
                break;
            }
            size_t j = end;
            while (j > 0 && !is_python_space(text[j - 1])) --j;
            parts.insert(parts.begin(), std::string(text.substr(j, end - j)));
            end = j;
        }
    }
    return parts;
}

std::vector<std::string> python_splitlines(std::string_view text) {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
            lines.emplace_back(text.substr(start, i - start));
            if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
            start = i + 1;
        }
    }
    if (start < text.size()) lines.emplace_back(text.substr(start));
    return lines;
}

std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count) {
    if (count < 0) count = INT64_MAX;
    std::string out;
    if (old_text.empty()) {
        // Python puts the replacement before every character and at the end.
        const std::vector<std::string> cps = utf8_code_points(text);
        for (size_t i = 0; i <= cps.size(); ++i) {
            if (count-- > 0) out += new_text;
            if (i < cps.size()) out += cps[i];
        }
        return out;
    }
    size_t start = 0;
    while (count-- > 0) {
        const size_t at = text.find(old_text, start);
        if (at == std::string_view::npos) break;
        out.append(text.substr(start, at - start));
        out += new_text;
        start = at + old_text.size();
    }
    out.append(text.substr(start));
    return out;
}

int64_t python_count(std::string_view text, std::string_view sub) {
    if (sub.empty()) return static_cast<int64_t>(utf8_length(text)) + 1;
    int64_t n = 0;
    for (size_t at = text.find(sub); at != std::string_view::npos; at = text.find(sub, at + sub.size())) ++n;
    return n;
}

std::string ascii_upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = to_upper(c);
    return out;
}

std::string ascii_lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = to_lower(c);
    return out;
}

std::string python_title(std::string_view text) {
    std::string out(text);
    bool previous_cased = false;
    for (char& c : out) {
        if (is_ascii_letter(c)) {
            c = previous_cased ? to_lower(c) : to_upper(c);
            previous_cased = true;
        } else {
            previous_cased = false;
        }
    }
    return out;
}

std::string python_capitalize(std::string_view text) {
    std::string out = ascii_lower(text);
    if (!out.empty()) out[0] = to_upper(out[0]);
    return out;
}

std::string html_escape(std::string_view text) {
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

}  // namespace kiln::chat
