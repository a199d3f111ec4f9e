#include "formats/tokenizer/gpt2_pretokenizer.h"

#include "formats/tokenizer/unicode_class.h"
#include "formats/tokenizer/utf8.h"

namespace kiln {

namespace {

struct CharAt {
    CharClass cls;
    size_t length;
};

CharAt char_at(std::string_view text, size_t at) noexcept {
    const auto lead = static_cast<uint8_t>(text[at]);
    if (lead < 0x80) return {char_class(lead), 1};
    const Utf8Scan scan = utf8_scan(text.substr(at));
    if (scan.status != Utf8Status::complete) return {CharClass::other, scan.length};
    return {char_class(utf8_code_point(text.substr(at), scan.length)), scan.length};
}

// The end of the run of characters of class `cls` that starts at `at`.
size_t run_end(std::string_view text, size_t at, CharClass cls) noexcept {
    while (at < text.size()) {
        const CharAt c = char_at(text, at);
        if (c.cls != cls) break;
        at += c.length;
    }
    return at;
}

bool is_contraction_letter(char c) noexcept { return c == 's' || c == 't' || c == 'm' || c == 'd'; }

}  // namespace

size_t gpt2_pretoken_end(std::string_view text, size_t at) noexcept {
    const size_t size = text.size();
    // 1. contractions
    if (text[at] == '\'' && at + 1 < size) {
        if (is_contraction_letter(text[at + 1])) return at + 2;
        if (at + 2 < size) {
            const std::string_view two = text.substr(at + 1, 2);
            if (two == "re" || two == "ve" || two == "ll") return at + 3;
        }
    }
    // 2-4. " ?" and a run of letters, numbers or other characters
    if (text[at] == ' ' && at + 1 < size) {
        const CharAt next = char_at(text, at + 1);
        if (next.cls != CharClass::whitespace) return run_end(text, at + 1 + next.length, next.cls);
    }
    const CharAt first = char_at(text, at);
    if (first.cls != CharClass::whitespace) return run_end(text, at + first.length, first.cls);

    // 5-6. whitespace: the run, less its last character when a non-space follows
    size_t last_start = at;
    size_t end = at + first.length;
    while (end < size) {
        const CharAt c = char_at(text, end);
        if (c.cls != CharClass::whitespace) break;
        last_start = end;
        end += c.length;
    }
    if (end == size) return end;  // nothing follows
    return last_start > at ? last_start : end;
}

}  // namespace kiln
