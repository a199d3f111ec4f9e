#pragma once
// llama.cpp's escape processing (-e, on by default; --no-escape turns it off):
// in a prompt written on the command line, \n \r \t \' \" \\ and \xHH stand for
// the characters they name, so that `-p "Q: hi\nA:"` carries a newline. Any
// other backslash stays as written, as does an \x without two hex digits.
#include <string>
#include <string_view>

namespace kiln::cli {

inline std::string process_escapes(std::string_view text) {
    auto hex_digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\' || i + 1 == text.size()) {
            out += text[i];
            continue;
        }
        const char c = text[++i];
        switch (c) {
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case 'x':
                if (i + 2 < text.size() && hex_digit(text[i + 1]) >= 0 && hex_digit(text[i + 2]) >= 0) {
                    out += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
                    i += 2;
                    break;
                }
                [[fallthrough]];
            default:
                out += '\\';
                out += c;
        }
    }
    return out;
}

}  // namespace kiln::cli
