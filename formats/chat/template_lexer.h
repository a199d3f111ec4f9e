#pragma once
// Cuts a chat template into text and tags, the way jinja2's lexer does with
// Hugging Face's settings: trim_blocks (the newline after a block or comment
// tag goes), lstrip_blocks (spaces and tabs before a block or comment tag on
// its own line go), "-" inside a tag strips all whitespace on that side, "+"
// keeps it; comments vanish; one trailing newline of the template is dropped.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::chat {

struct Token {
    enum class Kind { name, string, integer, floating, symbol };
    Kind kind = Kind::symbol;
    std::string text;  // the name, the string's value, or the symbol
    int64_t integer = 0;
    double floating = 0;
    int line = 0;
};

// A stretch of text, a {{ expression }} or a {% statement %}.
struct Piece {
    enum class Kind { text, output, statement };
    Kind kind = Kind::text;
    std::string text;           // text pieces
    std::vector<Token> tokens;  // the tag's contents
    int line = 0;               // where the piece starts
};

// Throws kiln::Error("chat", ...) for an unclosed tag or comment, an
// unterminated string or a character no expression uses.
std::vector<Piece> lex_template(std::string_view source);

}  // namespace kiln::chat
