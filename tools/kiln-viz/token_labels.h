#pragma once
// Tokens as kiln-viz shows them: the vocabulary's spelling (SentencePiece's
// "▁", GPT-2's "Ġ" and special tokens as they are), for the npz's `tokens`
// array; and a readable label for the pictures, where a space or a control
// character would be invisible.
#include <fmt/format.h>

#include <span>
#include <string>
#include <vector>

#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"

namespace kiln::viz {

inline std::vector<std::string> token_texts(const Tokenizer& tokenizer, std::span<const int32_t> ids) {
    std::vector<std::string> texts;
    for (int32_t id : ids) texts.push_back(tokenizer.token_text(id));
    return texts;
}

// Spaces as "␣", control bytes as \n, \t or \xNN (every byte past ASCII
// too when the text is not UTF-8); at most 24 bytes (then "…").
inline std::string display_label(const std::string& text) {
    const bool utf8 = utf8_valid(text);
    std::string out;
    for (unsigned char c : text) {
        if (c == ' ') out += "␣";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    if (out.size() > 24) {
        size_t cut = 24;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;  // whole UTF-8 characters
        out = out.substr(0, cut) + "…";
    }
    return out;
}

inline std::vector<std::string> display_labels(const std::vector<std::string>& texts) {
    std::vector<std::string> labels;
    for (const std::string& t : texts) labels.push_back(display_label(t));
    return labels;
}

}  // namespace kiln::viz
