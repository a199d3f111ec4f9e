#include "formats/chat/template_lexer.h"

#include <charconv>

#include "engine/core/error.h"
#include "formats/tokenizer/utf8.h"

namespace kiln::chat {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// jinja2 reads the template with newlines normalised to "\n" and without its last newline.
std::string normalise_source(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}


int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Lexer {
public:
    explicit Lexer(std::string_view source) : src_(normalise_source(source)) {}

    std::vector<Piece> run() {
        bool line_starting = true;  // jinja2: whether the text to come begins a line
        while (pos_ < src_.size()) {
            const size_t tag = find_tag(pos_);
            std::string text = src_.substr(pos_, tag - pos_);
            const int text_line = line_;
            advance_to(tag);
            if (tag < src_.size()) {
                const char type = src_[tag + 1];
                const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
                if (sign == '-') {
                    while (!text.empty() && is_space(text.back())) text.pop_back();
                } else if (sign != '+' && type != '{') {
                    // lstrip_blocks: drop the spaces before a block or comment tag that starts its line.
                    const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
                    if (line_start > 0 || line_starting) {
                        bool blank = line_start < text.size();
                        for (size_t i = line_start; i < text.size(); ++i) blank = blank && is_space(text[i]);
                        if (blank) text.resize(line_start);
                    }
                }
            }
            if (!text.empty()) pieces_.push_back(Piece{Piece::Kind::text, std::move(text), {}, text_line});
            if (tag >= src_.size()) break;
            line_starting = read_tag();
        }
        return std::move(pieces_);
    }

private:
    size_t find_tag(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return src_.size();
    }

    void advance_to(size_t to) {
        for (; pos_ < to; ++pos_)
            if (src_[pos_] == '\n') ++line_;
    }

    // Reads the tag at pos_; returns whether what it consumed ends a line.
    bool read_tag() {
        const char type = src_[pos_ + 1];
        const int start_line = line_;
        advance_to(pos_ + 2);
        if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
        if (type == '#') {
            const size_t end = src_.find("#}", pos_);
            if (end == std::string::npos) fail("chat", "template line {}: comment '{{#' is never closed with '#}}'", start_line);
            const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
            advance_to(end + 2);
            return finish_tag(sign, true);
        }
        Piece piece;
        piece.kind = type == '{' ? Piece::Kind::output : Piece::Kind::statement;
        piece.line = start_line;
        const std::string_view close = type == '{' ? "}}" : "%}";
        int depth = 0;  // open brackets: a "}}" inside a dict literal does not end the tag (as in jinja2)
        std::vector<std::pair<std::string, int>> open_brackets;
        while (true) {
            while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
            if (pos_ >= src_.size()) {
                if (!open_brackets.empty())
                    fail("chat", "template line {}: '{}' is never closed (the tag opened on line {} runs to the end of the template)",
                         open_brackets.back().second, open_brackets.back().first, start_line);
                fail("chat", "template line {}: tag '{}' is never closed with '{}'", start_line, type == '{' ? "{{" : "{%", close);
            }
            if (depth == 0) {
                char sign = '\0';
                size_t at = pos_;
                if ((src_[at] == '-' || src_[at] == '+') && src_.compare(at + 1, 2, close) == 0) sign = src_[at++];
                if (src_.compare(at, 2, close) == 0) {
                    advance_to(at + 2);
                    pieces_.push_back(std::move(piece));
                    return finish_tag(sign, type == '%');
                }
            }
            Token token = read_token(start_line);
            if (token.kind == Token::Kind::symbol) {
                if (token.text == "(" || token.text == "[" || token.text == "{") {
                    ++depth;
                    open_brackets.emplace_back(token.text, token.line);
                }
                if ((token.text == ")" || token.text == "]" || token.text == "}") && depth > 0) {
                    const std::string& open = open_brackets.back().first;
                    const std::string expected = open == "(" ? ")" : open == "[" ? "]" : "}";
                    if (token.text != expected)
                        fail("chat", "template line {}: unexpected '{}' (expected '{}' to close the '{}' of line {})", token.line, token.text,
                             expected, open, open_brackets.back().second);
                    --depth;
                    open_brackets.pop_back();
                }
            }
            piece.tokens.push_back(std::move(token));
        }
    }

    // After a tag: "-" eats the whitespace that follows, trim_blocks one newline.
    bool finish_tag(char sign, bool block) {
        const size_t start = pos_;
        if (sign == '-') {
            while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
        } else if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
            advance_to(pos_ + 1);
        }
        return pos_ > start && src_[pos_ - 1] == '\n';
    }

    Token read_token(int tag_line) {
        Token token;
        token.line = line_;
        const char c = src_[pos_];
        if (is_name_start(c)) {
            size_t end = pos_;
            while (end < src_.size() && (is_name_start(src_[end]) || is_digit(src_[end]))) ++end;
            token.kind = Token::Kind::name;
            token.text = src_.substr(pos_, end - pos_);
            advance_to(end);
            return token;
        }
        if (is_digit(c)) return read_number();
        if (c == '\'' || c == '"') return read_string(tag_line);
        static const char* const symbols[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                              "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        for (const char* symbol : symbols) {
            const std::string_view s(symbol);
            if (src_.compare(pos_, s.size(), s) == 0) {
                token.text = std::string(s);
                advance_to(pos_ + s.size());
                return token;
            }
        }
        fail("chat", "template line {}: unexpected character '{}' in a tag", line_, c);
    }

    Token read_number() {
        Token token;
        token.line = line_;
        std::string digits;
        bool is_float = false;
        size_t i = pos_;
        const auto take_digits = [&] {
            while (i < src_.size() && (is_digit(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])))) {
                if (src_[i] != '_') digits += src_[i];
                ++i;
            }
        };
        take_digits();
        if (i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) {
            is_float = true;
            digits += src_[i++];
            take_digits();
        }
        if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
            size_t j = i + 1;
            if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
            if (j < src_.size() && is_digit(src_[j])) {
                is_float = true;
                digits += 'e';
                digits.append(src_, i + 1, j - i - 1);
                i = j;
                take_digits();
            }
        }
        advance_to(i);
        if (is_float) {
            token.kind = Token::Kind::floating;
            std::from_chars(digits.data(), digits.data() + digits.size(), token.floating);
        } else {
            token.kind = Token::Kind::integer;
            const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.integer);
            if (result.ec != std::errc()) fail("chat", "template line {}: integer literal {} is too large", token.line, digits);
        }
        token.text = digits;
        return token;
    }

    // Python's unicode-escape rules, as jinja2 applies them to string literals.
    Token read_string(int tag_line) {
        Token token;
        token.kind = Token::Kind::string;
        token.line = line_;
        const char quote = src_[pos_];
        size_t i = pos_ + 1;
        std::string value;
        while (true) {
            if (i >= src_.size()) fail("chat", "template line {}: string literal is never closed (tag opened on line {})", token.line, tag_line);
            const char c = src_[i];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                ++i;
                continue;
            }
            if (i + 1 >= src_.size()) fail("chat", "template line {}: string literal is never closed", token.line);
            const char e = src_[i + 1];
            i += 2;
            switch (e) {
                case 'n': value += '\n'; break;
                case 't': value += '\t'; break;
                case 'r': value += '\r'; break;
                case '\\': value += '\\'; break;
                case '\'': value += '\''; break;
                case '"': value += '"'; break;
                case 'a': value += '\a'; break;
                case 'b': value += '\b'; break;
                case 'f': value += '\f'; break;
                case 'v': value += '\v'; break;
                case '\n': break;  // a backslash before a newline joins the lines
                case 'x':
                case 'u':
                case 'U': {
                    const int width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    uint32_t cp = 0;
                    for (int k = 0; k < width; ++k) {
                        const int h = i + k < src_.size() ? hex_value(src_[i + k]) : -1;
                        if (h < 0) fail("chat", "template line {}: truncated \\{} escape in a string literal", token.line, e);
                        cp = cp * 16 + static_cast<uint32_t>(h);
                    }
                    if (cp > 0x10FFFF) fail("chat", "template line {}: \\{} escape beyond U+10FFFF in a string literal", token.line, e);
                    i += static_cast<size_t>(width);
                    utf8_append(value, cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t cp = static_cast<uint32_t>(e - '0');
                        for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) cp = cp * 8 + static_cast<uint32_t>(src_[i++] - '0');
                        utf8_append(value, cp);
                    } else {
                        value += '\\';  // Python keeps an unknown escape as written
                        value += e;
                    }
            }
        }
        advance_to(i + 1);
        token.text = std::move(value);
        return token;
    }

    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Piece> pieces_;
};

}  // namespace

std::vector<Piece> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace kiln::chat
