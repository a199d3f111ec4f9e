#include "formats/tokenizer/llama3_pretokenizer.h"

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

bool is_line_break(char c) noexcept { return c == '\r' || c == '\n'; }

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

size_t run_end(std::string_view text, size_t at, CharClass cls) noexcept {
    while (at < text.size()) {
        const CharAt c = char_at(text, at);
        if (c.cls != cls) break;
        at += c.length;
    }
    return at;
}

}  // namespace

size_t llama3_pretoken_end(std::string_view text, size_t at) noexcept {
    const size_t size = text.size();
    // 1. contractions, either case
    if (text[at] == '\'' && at + 1 < size) {
        const char next = lower(text[at + 1]);
        if (next == 's' || next == 't' || next == 'm' || next == 'd') return at + 2;
        if (at + 2 < size) {
            const char after = lower(text[at + 2]);
            if ((next == 'r' && after == 'e') || (next == 'v' && after == 'e') || (next == 'l' && after == 'l'))
                return at + 3;
        }
    }
    const CharAt first = char_at(text, at);
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_line_break(text[at]) && first.cls != CharClass::number) {
        const size_t second = at + first.length;
        if (first.cls == CharClass::letter) return run_end(text, second, CharClass::letter);
        if (second < size && char_at(text, second).cls == CharClass::letter)
            return run_end(text, second, CharClass::letter);
    }
    // 3. \p{N}{1,3}
    if (first.cls == CharClass::number) {
        size_t end = at + first.length;
        for (int count = 1; count < 3 && end < size; ++count) {
            const CharAt c = char_at(text, end);
            if (c.cls != CharClass::number) break;
            end += c.length;
        }
        return end;
    }
    // 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t other = at;
    if (text[at] == ' ') {
        if (at + 1 == size) return size;  // a last lone space
        other = at + 1;
    }
    if (char_at(text, other).cls == CharClass::other) {
        size_t end = run_end(text, other, CharClass::other);
        while (end < size && is_line_break(text[end])) ++end;
        return end;
    }
    // 5-6. whitespace
    size_t last_start = at, end = at, after_line_break = 0;
    while (end < size) {
        const CharAt c = char_at(text, end);
        if (c.cls != CharClass::whitespace) break;
        last_start = end;
        end += c.length;
        if (is_line_break(text[last_start])) after_line_break = end;
    }
    if (after_line_break > 0) return after_line_break;
    if (end == at) return at + first.length;  // not reached: every character has a class above
    if (end < size && last_start > at) return last_start;
    return end;
}

}  // namespace kiln
