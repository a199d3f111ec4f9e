#pragma once
// The pre-tokenizers of byte-level BPE vocabularies, chosen by the GGUF key
// tokenizer.ggml.pre, with the names, rules and flags of llama.cpp's
// llama-vocab.cpp (kiln matches llama.cpp's token ids, so its rules are the
// reference, quirks included).
//
// A pre-tokenizer is a list of regular expressions applied in turn: the first
// cuts the text into pieces, each next one cuts every piece further (a match
// and each gap between matches is a piece). Two patterns are run by hand-
// written splitters, as llama.cpp does: GPT-2's (gpt2_pretokenizer.h) and
// Llama 3's (llama3_pretokenizer.h); the others by PCRE2 as llama.cpp's
// std::regex runs them (pretokenizer_regex.h).
//
// Text is first read as llama.cpp reads it: a byte that cannot start a
// character, or whose continuation bytes are missing, becomes U+FFFD (one
// per byte); lead bytes are not checked for overlong forms or surrogates
// (C0 80 reads as U+0000), and a code point above U+10FFFF becomes U+FFFD
// (llama.cpp throws on it). The pieces come back as UTF-8 of what was read,
// so BPE never sees an invalid byte.
//
// Character classes come from kiln's Unicode 14.0 tables (unicode_class.h,
// unicode_category.h); llama.cpp generates its own from a later UnicodeData,
// so a character assigned since 14.0 may be classed differently ("other"
// here).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer/pretokenizer_regex.h"

namespace kiln {

class BpePretokenizer {
public:
    // The pre-tokenizer for a tokenizer.ggml.pre value (an empty name is
    // "default", as llama.cpp takes a missing key). An unknown name throws
    // kiln::Error("tokenizer", ...) naming it and `file_name`.
    BpePretokenizer(std::string_view pre, std::string_view file_name);

    // The pieces of `text`, in order; their concatenation is `text` as read
    // (see above).
    std::vector<std::string> split(std::string_view text) const;

    const std::string& name() const noexcept { return name_; }
    // llama3, tekken: a piece that is a token as a whole is that token, before any merge.
    bool ignore_merges() const noexcept { return ignore_merges_; }
    // clean_up_tokenization_spaces (a decoding flag kiln reports but does not apply).
    bool clean_spaces() const noexcept { return clean_spaces_; }
    // The add_bos_token default this type sets (tokenizer.ggml.add_bos_token overrides it).
    bool add_bos_default() const noexcept { return add_bos_default_; }
    // chatglm-bpe: the vocabulary has no BOS unless the file names one.
    bool bos_default_none() const noexcept { return bos_default_none_; }

    // Every tokenizer.ggml.pre value kiln accepts, for messages and tests.
    static std::vector<std::string_view> known_names();

private:
    enum class Splitter : uint8_t { gpt2, llama3, regex };
    struct Step {
        Splitter splitter;
        std::optional<PretokenizerRegex> regex;
    };
    std::string name_;
    std::vector<Step> steps_;
    bool ignore_merges_ = false;
    bool clean_spaces_ = true;
    bool add_bos_default_ = false;
    bool bos_default_none_ = false;
};

// The code points of `text` as llama.cpp reads them (see above).
std::u32string llama_code_points(std::string_view text);

}  // namespace kiln
