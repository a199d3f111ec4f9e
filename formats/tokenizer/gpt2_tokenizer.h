#pragma once
// Byte-level BPE tokenizers (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3,
// Qwen2, DeepSeek, Falcon, StarCoder...), as OpenAI's published encoder.py
// runs GPT-2's and llama.cpp runs the others.
//
// Vocabulary: tokenizer.ggml.tokens (the token texts, in GPT-2's byte-level
// alphabet), tokenizer.ggml.merges ("left right" strings; a merge's rank is its
// index, lower ranks merge first; a pair listed twice keeps its later rank, as
// encoder.py's dict does), optional tokenizer.ggml.token_type,
// tokenizer.ggml.pre (the pre-tokenizer, bpe_pretokenizer.h; missing means
// "default", as in llama.cpp), tokenizer.ggml.{bos,eos,padding}_token_id
// (bos and eos default to 11 as in llama.cpp, when the vocabulary has a
// token 11; chatglm-bpe has no default BOS), tokenizer.ggml.add_bos_token
// (default false, true for the llama3, tekken and chameleon pre-tokenizers),
// tokenizer.ggml.add_eos_token (default false) and the special-token keys of
// special_tokens.h.
//
// The byte-level alphabet: every byte stands for one character. The
// printable bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for
// themselves; the other 68 (controls, the space, U+00AD ...) in byte order for
// U+0100, U+0101, ... (so the space is "Ġ" U+0120, the newline "Ċ" U+010A).
//
// Encoding:
//   0. special tokens written in the text are cut out (special_tokens.h);
//   1. the text is cut into pre-tokens by the vocabulary's pre-tokenizer
//      (bpe_pretokenizer.h; "gpt-2" is GPT-2's pattern, gpt2_pretokenizer.h);
//      with llama3 and tekken, a pre-token that is a token as a whole is that
//      token (llama.cpp's ignore_merges);
//   2. each pre-token becomes one symbol per byte (the token of that byte's
//      character: a vocabulary without one throws kiln::Error naming the byte);
//   3. within a pre-token, the adjacent pair with the lowest merge rank is
//      merged, every occurrence of it from left to right, again and again until
//      no adjacent pair has a merge;
//   4. the remaining symbols are the ids.
// Any bytes are accepted; as in llama.cpp, bytes that are not valid UTF-8
// are read as U+FFFD (bpe_pretokenizer.h) and encode as its bytes.
//
// Every merge's two parts and its result must be tokens (not control tokens),
// checked when loading, so symbols are token ids throughout. Step 3 keeps the
// symbols in a linked list and candidate pairs in a priority queue ordered by
// (rank, position). Pairs a merge creates wait until all occurrences of the
// merge being applied are done, which is exactly encoder.py's loop even for
// merge lists whose later pairs outrank earlier ones. O(n log n) per pre-token.
//
// Decoding maps each character of a token's text back to its byte (a
// character outside the byte-level alphabet gives its own UTF-8 bytes), so a
// piece may be part of a UTF-8 character: stream pieces through Utf8Stream.
// Control tokens (<|endoftext|>) decode to nothing. decode(encode(s)) == s
// for every valid UTF-8 string s that spells no special token (or with
// parse_special off, no user-defined token).
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unordered_map>

#include "formats/tokenizer/bpe_pretokenizer.h"
#include "formats/tokenizer/special_tokens.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln {

class Gpt2Tokenizer final : public Tokenizer {
public:
    // Throws kiln::Error("tokenizer", ...) naming the key for a missing or
    // ill-typed key, a model other than "gpt2", a malformed merge or one whose
    // parts or result are not tokens, or an out-of-range id.
    explicit Gpt2Tokenizer(const GgufFile& file);

    using Tokenizer::encode;
    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override;
    std::string decode(std::span<const int32_t> ids, bool from_start = true) const override;
    std::string piece(int32_t id) const override;
    int32_t bos() const noexcept override { return bos_; }
    int32_t eos() const noexcept override { return eos_; }
    int32_t pad() const noexcept override { return pad_; }
    bool add_bos() const noexcept override { return add_bos_; }
    bool add_eos() const noexcept override { return add_eos_; }
    bool is_eog(int32_t id) const noexcept override { return special_.is_eog(id); }
    const BpePretokenizer& pretokenizer() const noexcept { return pretokenizer_; }
    size_t vocab_size() const noexcept override { return tokens_.size(); }
    const std::string& token_text(int32_t id) const override;
    TokenType token_type(int32_t id) const;
    size_t merge_count() const noexcept { return merge_count_; }

    // GPT-2's byte-level alphabet: the code point that stands for a byte.
    static char32_t byte_char(uint8_t byte) noexcept;

private:
    // (left id, right id) -> (rank, merged id), open addressing, linear probing.
    struct MergeSlot {
        uint64_t key;  // left << 32 | right; kEmptyKey when free
        int32_t rank;
        int32_t result;
    };
    static constexpr uint64_t kEmptyKey = ~uint64_t{0};
    const MergeSlot* find_merge(int32_t left, int32_t right) const noexcept;
    void check_id(int32_t id) const;
    struct Workspace;
    void encode_pretoken(std::string_view bytes, Workspace& work, std::vector<int32_t>& out) const;

    std::vector<std::string> tokens_;
    std::vector<TokenType> types_;              // with llama.cpp's overrides (special_tokens.h)
    BpePretokenizer pretokenizer_;
    SpecialTokens special_;
    std::unordered_map<std::string, int32_t> whole_ids_;  // token text -> id (last wins), for ignore_merges
    std::vector<std::string> pieces_;           // the bytes each token decodes to
    std::array<int32_t, 256> byte_tokens_{};    // the token of each byte's character, or -1
    std::vector<MergeSlot> merge_table_;        // size a power of two, at most half full
    size_t merge_count_ = 0;
    int32_t bos_ = -1, eos_ = -1, pad_ = -1;
    bool add_bos_ = false;
    bool add_eos_ = false;
};

}  // namespace kiln
