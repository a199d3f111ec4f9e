#pragma once
// One interface for kiln's tokenizers, and the loader that picks one by a GGUF
// file's tokenizer.ggml.model:
//   "llama"  SpmTokenizer   SentencePiece-style BPE (spm_tokenizer.h)
//   "gpt2"   Gpt2Tokenizer  GPT-2's byte-level BPE (gpt2_tokenizer.h)
//   "char"   CharTokenizer  one token per character, kiln's extension (char_tokenizer.h)
// Special tokens written in a text ("<|im_end|>", "<s>") become their ids
// when EncodeOptions::parse_special is set (the default), as llama.cpp's
// parse_special does (special_tokens.h); user-defined tokens are cut out of
// the text either way. Pieces are byte strings that may cut a UTF-8
// character (stream them through Utf8Stream, utf8.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's numbering).
enum class TokenType : int32_t {
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6,
};

struct EncodeOptions {
    bool add_bos = false;       // the BOS id in front (when the vocabulary has one)
    bool add_eos = false;       // the EOS id at the end (when the vocabulary has one)
    bool parse_special = true;  // control tokens written in the text become their ids
};

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Token ids of `text` (see EncodeOptions).
    virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const = 0;
    // Token ids of `text`, with the BOS id in front when `add_bos` is set (and
    // the vocabulary has one); special tokens in the text are parsed.
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const {
        return encode(text, EncodeOptions{.add_bos = add_bos});
    }
    // The options a prompt is encoded with: BOS and EOS as the vocabulary
    // asks (add_bos_token, add_eos_token).
    EncodeOptions prompt_options(bool parse_special = true) const {
        return EncodeOptions{.add_bos = add_bos(), .add_eos = add_eos(), .parse_special = parse_special};
    }
    // The text of `ids`; `from_start` says they begin a text (SPM then drops the
    // space its encoder put in front). Throws kiln::Error for an id outside the
    // vocabulary.
    virtual std::string decode(std::span<const int32_t> ids, bool from_start = true) const = 0;
    // The raw bytes one token contributes to a text.
    virtual std::string piece(int32_t id) const = 0;
    virtual int32_t bos() const noexcept = 0;  // -1: none
    virtual int32_t eos() const noexcept = 0;  // -1: none
    virtual int32_t pad() const noexcept { return -1; }
    // tokenizer.ggml.add_bos_token: whether callers should pass add_bos = true.
    virtual bool add_bos() const noexcept = 0;
    // tokenizer.ggml.add_eos_token: whether prompts end with EOS.
    virtual bool add_eos() const noexcept { return false; }
    // Whether generation should stop at `id`: eos, eot, eom and the
    // end-of-turn tokens llama.cpp knows (special_tokens.h).
    virtual bool is_eog(int32_t id) const noexcept { return id >= 0 && id == eos(); }
    // SPM's leading "▁" (tokenizer.ggml.add_space_prefix).
    virtual bool add_space_prefix() const noexcept { return false; }
    virtual size_t vocab_size() const noexcept = 0;
    // The token as the vocabulary spells it; kiln::Error for an id outside it.
    virtual const std::string& token_text(int32_t id) const = 0;
};

// Picks by tokenizer.ggml.model: "llama" (SpmTokenizer), "gpt2"
// (Gpt2Tokenizer), "char" (CharTokenizer); anything else, or a missing key,
// throws kiln::Error("tokenizer", ...) listing the known ones. The tokenizer
// copies what it needs: the file may be closed afterwards.
std::unique_ptr<Tokenizer> load_tokenizer(const GgufFile& file);

}  // namespace kiln
