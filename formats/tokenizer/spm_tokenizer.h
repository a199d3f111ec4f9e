#pragma once
// The SentencePiece-style BPE tokenizer of LLaMA-family GGUF files
// (tokenizer.ggml.model = "llama"), as llama.cpp and sentencepiece run it.
//
// Encoding:
//   0. special tokens written in the text are cut out (special_tokens.h); the
//      text between them is encoded as below, each piece on its own;
//   1. every space becomes U+2581 "▁", and one "▁" goes in front of a
//      non-empty piece at the start of the text or right after a special
//      token (tokenizer.ggml.add_space_prefix, default true; llama.cpp's rule);
//   2. the text is cut into UTF-8 characters, the initial symbols; in text
//      that is not valid UTF-8, a symbol is as many bytes as its first byte
//      announces (a stray continuation byte one), whatever follows, as in
//      llama.cpp;
//   3. repeatedly, the adjacent pair of symbols whose concatenation is a
//      vocabulary piece of the highest score is merged (the leftmost pair on a
//      tie), until no adjacent pair forms a piece;
//   4. a symbol that is a piece gives that piece's id; any other symbol is
//      spelled as byte tokens <0xNN>, one per byte ("byte fallback"), or gives
//      the unknown token when the vocabulary lacks one of those byte tokens.
// Only normal and user-defined tokens are pieces. Control (<s>), unknown,
// unused and byte tokens are never the result of a merge, so text that spells
// "<s>" or "<0x41>" stays text (sentencepiece's rule; llama.cpp would also
// allow such merges, which makes no difference on LLaMA vocabularies, where no
// such token can be assembled from two pieces). User-defined tokens are cut
// out of the text before merging (step 0), as llama.cpp does.
//
// Step 3 keeps the symbols in a linked list and the candidate pairs in a
// priority queue; pairs invalidated by an earlier merge are skipped when they
// come up. That is O(n log n) in the text length. When no piece has a "▁"
// after another character (true of SentencePiece models trained with
// split_by_whitespace, LLaMA's included; checked when loading), no merge can
// cross the start of a word, so each word is merged on its own: the same
// result, with small queues that stay in cache (1 MB of text: ~0.1 s).
//
// Decoding: a normal or user-defined token gives its text with "▁" turned
// back into a space, a byte token its single raw byte (so pieces may cut
// UTF-8 characters: stream them through Utf8Stream), the unknown token
// U+2585 "▅" (as llama.cpp shows it), control and unused tokens nothing.
// decode() from the start of a text drops one leading space from the first
// non-empty piece: the one add_space_prefix put there (llama.cpp does the
// same). Because exactly one is dropped, decode(encode(s)) == s also for text
// that starts with spaces (encode(" a") is "▁▁a", decoded " a"), for every s
// that holds no "▁" itself (after encoding, a "▁" in the input cannot be told
// from a space), given a vocabulary with "▁" as a piece (otherwise the prefix
// itself takes byte fallback and decodes as "▁").
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer/special_tokens.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln {

class SpmTokenizer final : public Tokenizer {
public:
    // Reads tokenizer.ggml.{model, tokens, scores, token_type} and the optional
    // bos_token_id, eos_token_id, unknown_token_id (llama.cpp's defaults 1, 2
    // and 0, where the vocabulary has those ids), add_bos_token (default
    // true), add_eos_token (default false), add_space_prefix (default true)
    // and the special-token keys of special_tokens.h. The file may hold no tensors (a vocabulary-only file).
    // A missing or ill-typed key, a model other than "llama", arrays of
    // different lengths, an out-of-range id or token type, or a NaN score
    // throws kiln::Error("tokenizer", ...) naming the key.
    explicit SpmTokenizer(const GgufFile& file);

    // Token ids of `text` (see EncodeOptions). Any bytes are accepted; empty
    // text gives nothing but the BOS (and EOS) asked for.
    using Tokenizer::encode;
    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override;

    // The text of `ids`. With `from_start` (the default) the ids are taken to
    // begin a text, and the space that add_space_prefix added is dropped; pass
    // false to decode a continuation, e.g. generated tokens after a prompt.
    // Throws kiln::Error for an id outside the vocabulary.
    std::string decode(std::span<const int32_t> ids, bool from_start = true) const override;

    // The bytes one token contributes to a text, for streaming output (see the
    // decoding rules above; no leading space is ever dropped here).
    std::string piece(int32_t id) const override;

    int32_t bos() const noexcept override { return bos_; }
    int32_t eos() const noexcept override { return eos_; }
    int32_t unk() const noexcept { return unk_; }
    // tokenizer.ggml.add_bos_token: whether callers should pass add_bos = true.
    bool add_bos() const noexcept override { return add_bos_; }
    bool add_eos() const noexcept override { return add_eos_; }
    bool is_eog(int32_t id) const noexcept override { return special_.is_eog(id); }
    bool add_space_prefix() const noexcept override { return add_space_prefix_; }
    size_t vocab_size() const noexcept override { return tokens_.size(); }

    // The token as the vocabulary spells it ("▁Hello", "<0x0A>", "<s>").
    // These throw kiln::Error for an id outside the vocabulary.
    const std::string& token_text(int32_t id) const override;
    TokenType token_type(int32_t id) const;
    float token_score(int32_t id) const;

private:
    // Normal and user-defined tokens by text, in an open-addressing table with
    // linear probing. Looking up candidate pairs is most of the encoding time;
    // a flat table of (hash tag, id) avoids std::unordered_map's pointer chasing
    // and looks a pair up as a view of the text, without building a string.
    struct PieceSlot {
        uint32_t tag;  // the upper half of the text's hash, to skip most string compares
        int32_t id;    // -1: empty
    };
    void add_piece(int32_t id);
    void check_id(int32_t id) const;
    int32_t piece_id(std::string_view text) const noexcept;
    struct Workspace;  // scratch buffers reused from one word to the next
    void encode_text(std::string_view text, bool space_prefix, Workspace& work, std::vector<int32_t>& out) const;
    void encode_span(std::string_view text, Workspace& work, std::vector<int32_t>& out) const;
    void append_symbol(std::string_view symbol, std::vector<int32_t>& out) const;
    void append_piece(int32_t id, std::string& out) const;

    std::vector<std::string> tokens_;
    std::vector<float> scores_;
    std::vector<TokenType> types_;              // with llama.cpp's overrides (special_tokens.h)
    SpecialTokens special_;
    std::vector<int16_t> byte_value_;           // per token: the byte of a <0xNN> token, else -1
    std::vector<PieceSlot> piece_table_;        // size a power of two, at most half full
    std::array<int32_t, 256> byte_tokens_{};    // the <0xNN> token of each byte, or -1
    int32_t bos_ = 1, eos_ = 2, unk_ = 0;
    bool add_bos_ = true;
    bool add_eos_ = false;
    bool add_space_prefix_ = true;
    bool split_words_ = false;  // no piece has "▁" after another character: see above
};

}  // namespace kiln
