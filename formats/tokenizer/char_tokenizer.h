#pragma once
// A character-level vocabulary (tokenizer.ggml.model = "char", kiln's
// extension) for the tutorial-sized models trained on a corpus's characters.
//
// Vocabulary: tokenizer.ggml.tokens, every normal token exactly one UTF-8
// character (a character listed twice keeps its first id);
// tokenizer.ggml.token_type optional (absent: all normal). Control tokens
// ("<s>", "</s>", "<pad>") and unknown tokens may have any text; no character
// of a text ever maps to them (the unknown token only stands in for a
// character outside the vocabulary). Other types (user-defined, byte, unused)
// are not allowed. Optional tokenizer.ggml.{bos,eos,padding,unknown}_token_id
// and tokenizer.ggml.add_bos_token (default false).
//
// Encoding maps each character of the text to its token, literally (a text
// that spells "<s>" is three characters: EncodeOptions::parse_special has no
// effect, the vocabulary's control tokens are markers kiln's trainer adds). A character outside the vocabulary
// gives the unknown token, or, when there is none, throws
// kiln::Error("tokenizer", ...) naming the character (U+XXXX) and its byte
// offset. Text that is not valid UTF-8 throws kiln::Error with the offset.
// Decoding concatenates the characters; control and unknown tokens decode to
// nothing. So decode(encode(s)) == s for valid UTF-8 made of vocabulary
// characters.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/tokenizer/tokenizer.h"

namespace kiln {

class CharTokenizer final : public Tokenizer {
public:
    // Throws kiln::Error("tokenizer", ...) naming the key for a missing or
    // ill-typed key, a model other than "char", a normal token that is not
    // exactly one character, a token type other than normal, control or
    // unknown, or an out-of-range id.
    explicit CharTokenizer(const GgufFile& file);

    using Tokenizer::encode;
    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override;
    std::string decode(std::span<const int32_t> ids, bool from_start = true) const override;
    std::string piece(int32_t id) const override;
    int32_t bos() const noexcept override { return bos_; }
    int32_t eos() const noexcept override { return eos_; }
    int32_t pad() const noexcept override { return pad_; }
    int32_t unk() const noexcept { return unk_; }
    bool add_bos() const noexcept override { return add_bos_; }
    size_t vocab_size() const noexcept override { return tokens_.size(); }
    const std::string& token_text(int32_t id) const override;
    TokenType token_type(int32_t id) const;

private:
    void check_id(int32_t id) const;

    std::vector<std::string> tokens_;
    std::vector<TokenType> types_;
    std::vector<int32_t> ascii_ids_;                  // id of each ASCII character, or -1
    std::unordered_map<char32_t, int32_t> char_ids_;  // every other character
    int32_t bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
    bool add_bos_ = false;
};

// The distinct characters of a valid UTF-8 text, ordered by code point: the
// normal tokens of a character vocabulary for that corpus. Throws
// kiln::Error("tokenizer", ...) with the byte offset for invalid UTF-8.
std::vector<std::string> char_vocabulary_of(std::string_view text);

}  // namespace kiln
