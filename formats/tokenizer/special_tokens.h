#pragma once
// What llama.cpp knows about a vocabulary's special tokens beyond the GGUF
// token types, derived the way llama-vocab.cpp derives it (kiln matches its
// token ids and its end of generation):
//
//   * end of generation (EOG): eos, tokenizer.ggml.eot_token_id,
//     eom_token_id, fim_pad/fim_rep/fim_sep_token_id, and every token whose
//     text is one of <|eot_id|> <|im_end|> <|end|> <end_of_turn>
//     <|endoftext|> <|eom_id|> <EOT>; without an eot key, the first token
//     spelled <|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> <EOT>
//     or <｜end▁of▁sentence｜> is the eot (kiln takes the lowest id where
//     llama.cpp takes whichever its hash map yields first);
//   * those end-of-turn texts, and the fill-in-the-middle markers llama.cpp
//     recognises by text (<|fim_prefix|>, <PRE>, ...), count as control
//     tokens whatever their type says (llama.cpp overrides the type);
//   * strip flags: for a vocabulary whose general.name names phi-3, every
//     control, user-defined and unknown token (and </s>) eats the whitespace
//     after it when it is found in a text, except <unk>, <s> and
//     <|endoftext|>; for tokenizer.ggml.pre jina-v2-de/-es/-code, <mask> eats
//     the whitespace before it. A vocabulary without the tokens these rules
//     name is refused, as llama.cpp refuses it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer/tokenizer.h"

namespace kiln {

class GgufFile;

struct SpecialTokens {
    std::vector<TokenType> types;   // the file's types with llama.cpp's overrides
    std::vector<uint8_t> strip;     // per token: kStripLeft | kStripRight
    std::vector<int32_t> by_length; // control, user-defined and unknown ids, longest text first (ties by id)
    std::vector<int32_t> eog;       // ascending
    int32_t eot = -1;
    int32_t eom = -1;

    static constexpr uint8_t kStripLeft = 1, kStripRight = 2;
    bool is_eog(int32_t id) const noexcept;
};

// Reads the keys named above (an id outside the vocabulary throws
// kiln::Error("tokenizer", ...) naming the key) and derives the rest from the
// token texts. `eos` is the vocabulary's eos id or -1.
SpecialTokens read_special_tokens(const GgufFile& file, const std::vector<std::string>& tokens,
                                  std::vector<TokenType> types, int32_t eos);

// A piece of a text cut by special tokens: text to tokenize, or a token id.
struct TextFragment {
    std::string_view text;
    int32_t token = -1;  // -1: text
};

// llama.cpp's partition of a text by the special tokens written in it: each
// special token, longest first, cuts every text fragment at each of its
// occurrences, left to right (so "longest first", not "leftmost first",
// decides overlaps), applying its strip flags to the neighbouring text.
// User-defined tokens always cut; control and unknown tokens only with
// `parse_special`.
std::vector<TextFragment> partition_special(std::string_view text, const SpecialTokens& special,
                                            const std::vector<std::string>& tokens, bool parse_special);

}  // namespace kiln
