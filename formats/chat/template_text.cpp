#include "formats/chat/template_text.h"

#include "formats/chat/template_value.h"

namespace kiln::chat {

namespace {

// Python's str.isspace() for ASCII; the separators 0x1c-0x1f count too.
bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// str.isspace() of one code point (UTF-8 bytes): the ASCII ones, NEL, NBSP,
// the Unicode space separators, line and paragraph separators.
bool is_python_space(std::string_view cp) {
    if (cp.size() == 1) return is_python_space(cp[0]);
    static const char* const spaces[] = {"\u0085", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
                                         "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029",
                                         "\u202f", "\u205f", "\u3000"};
    for (const char* space : spaces)
        if (cp == space) return true;
    return false;
}

// The code points of `text` with whether each is whitespace.
std::vector<std::pair<std::string, bool>> classify(std::string_view text) {
    std::vector<std::pair<std::string, bool>> out;
    for (std::string& cp : utf8_code_points(text)) {
        const bool space = is_python_space(std::string_view(cp));
        out.emplace_back(std::move(cp), space);
    }
    return out;
}

std::string join(const std::vector<std::pair<std::string, bool>>& cps, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) out += cps[i].first;
    return out;
}

}  // namespace

std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right) {
    if (!chars) {
        const auto cps = classify(text);
        size_t begin = 0, end = cps.size();
        if (left)
            while (begin < end && cps[begin].second) ++begin;
        if (right)
            while (end > begin && cps[end - 1].second) --end;
        return join(cps, begin, end);
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
    const auto cps = classify(text);
    if (!from_right) {
        size_t i = 0;
        while (true) {
            while (i < cps.size() && cps[i].second) ++i;
            if (i >= cps.size()) break;
            if (max_split-- <= 0) {
                parts.push_back(join(cps, i, cps.size()));  // the rest as it is, trailing whitespace included
                break;
            }
            size_t j = i;
            while (j < cps.size() && !cps[j].second) ++j;
            parts.push_back(join(cps, i, j));
            i = j;
        }
    } else {
        size_t end = cps.size();
        while (true) {
            while (end > 0 && cps[end - 1].second) --end;
            if (end == 0) break;
            if (max_split-- <= 0) {
                parts.insert(parts.begin(), join(cps, 0, end));
                break;
            }
            size_t j = end;
            while (j > 0 && !cps[j - 1].second) --j;
            parts.insert(parts.begin(), join(cps, j, end));
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

namespace {

// Simple case mappings of Latin-1, Latin Extended-A, Greek and Cyrillic
// (Python maps every script; these are the ones chat text meets most).
uint32_t upper_code_point(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool odd_lower = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
        if (odd_lower) return (c & 1) ? c - 1 : c;
        return (c & 1) ? c : c - 1;  // 0x139-0x148 and 0x179-0x17E pair an odd upper with an even lower
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

uint32_t lower_code_point(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool even_upper = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
        if (even_upper) return (c & 1) ? c : c + 1;
        return (c & 1) ? c + 1 : c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

bool is_cased(uint32_t c) { return upper_code_point(c) != c || lower_code_point(c) != c; }

uint32_t decode(std::string_view cp) {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(cp[i])); };
    if (cp.size() == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    if (cp.size() == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    if (cp.size() == 4) return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    return b(0);
}

void encode(std::string& out, uint32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// Maps each code point; `upper_next` says, given whether the previous code
// point was cased, whether this one goes to upper case.
template <typename Rule>
std::string map_case(std::string_view text, Rule upper_next) {
    std::string out;
    out.reserve(text.size());
    bool previous_cased = false;
    size_t index = 0;
    for (const std::string& cp : utf8_code_points(text)) {
        const uint32_t c = decode(cp);
        if (c < 0x80 && !is_cased(c)) {
            out += cp;
        } else {
            encode(out, upper_next(previous_cased, index) ? upper_code_point(c) : lower_code_point(c));
        }
        previous_cased = is_cased(c);
        ++index;
    }
    return out;
}

}  // namespace

std::string python_upper(std::string_view text) {
    return map_case(text, [](bool, size_t) { return true; });
}

std::string python_lower(std::string_view text) {
    return map_case(text, [](bool, size_t) { return false; });
}

std::string python_title(std::string_view text) {
    return map_case(text, [](bool previous_cased, size_t) { return !previous_cased; });
}

std::string python_capitalize(std::string_view text) {
    return map_case(text, [](bool, size_t index) { return index == 0; });
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
