#include "formats/tokenizer/char_tokenizer.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/utf8.h"
#include "formats/tokenizer/vocab_metadata.h"

namespace kiln {

namespace {

using vocab::kComponent;

// The length of the valid character at text[0]; throws for invalid UTF-8.
size_t require_char(std::string_view text, size_t offset) {
    const Utf8Scan scan = utf8_scan(text);
    if (scan.status != Utf8Status::complete)
        fail(kComponent, "the text is not valid UTF-8 at byte offset {} (byte 0x{:02X})", offset,
             static_cast<uint8_t>(text[0]));
    return scan.length;
}

}  // namespace

CharTokenizer::CharTokenizer(const GgufFile& file) {
    const std::string model = vocab::model_name(file);
    if (model != "char")
        fail(kComponent, "{}: tokenizer.ggml.model is '{}', but this tokenizer reads 'char' (character) "
             "vocabularies", file.name(), printable(model));
    tokens_ = vocab::require_tokens(file);
    const size_t n = tokens_.size();
    types_ = vocab::optional_token_types(file, n);

    ascii_ids_.assign(128, -1);
    for (size_t i = 0; i < n; ++i) {
        const TokenType type = types_[i];
        if (type == TokenType::control || type == TokenType::unknown) continue;
        if (type != TokenType::normal)
            fail(kComponent, "{}: tokenizer.ggml.token_type[{}] is {}, but a character vocabulary has only normal "
                 "(1), unknown (2) and control (3) tokens", file.name(), i, static_cast<int32_t>(type));
        const std::string_view text = tokens_[i];
        const Utf8Scan scan = text.empty() ? Utf8Scan{Utf8Status::invalid, 0} : utf8_scan(text);
        if (scan.status != Utf8Status::complete || scan.length != text.size())
            fail(kComponent, "{}: token {} is '{}', but every normal token of a character vocabulary must be "
                 "exactly one UTF-8 character", file.name(), i, printable(text));
        const char32_t cp = utf8_code_point(text, scan.length);
        const auto id = static_cast<int32_t>(i);
        if (cp < 128) {
            if (ascii_ids_[cp] < 0) ascii_ids_[cp] = id;
        } else {
            char_ids_.emplace(cp, id);  // a character listed twice keeps its first id
        }
    }

    bos_ = vocab::optional_token_id(file, "tokenizer.ggml.bos_token_id", n);
    eos_ = vocab::optional_token_id(file, "tokenizer.ggml.eos_token_id", n);
    pad_ = vocab::optional_token_id(file, "tokenizer.ggml.padding_token_id", n);
    unk_ = vocab::optional_token_id(file, "tokenizer.ggml.unknown_token_id", n);
    add_bos_ = vocab::optional_bool(file, "tokenizer.ggml.add_bos_token", false);
    if (add_bos_ && bos_ < 0)
        fail(kComponent, "{}: tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id",
             file.name());
}

std::vector<int32_t> CharTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    std::vector<int32_t> out;
    if (options.add_bos && bos_ >= 0) out.push_back(bos_);
    out.reserve(out.size() + text.size());
    for (size_t at = 0; at < text.size();) {
        const std::string_view rest = text.substr(at);
        const size_t length = require_char(rest, at);
        const char32_t cp = utf8_code_point(rest, length);
        int32_t id = -1;
        if (cp < 128) {
            id = ascii_ids_[cp];
        } else if (const auto found = char_ids_.find(cp); found != char_ids_.end()) {
            id = found->second;
        }
        if (id < 0) {
            if (unk_ < 0)
                fail(kComponent, "the character U+{:04X} '{}' at byte offset {} is not in the vocabulary (which has "
                     "no unknown token)", static_cast<uint32_t>(cp), printable(rest.substr(0, length)), at);
            id = unk_;
        }
        out.push_back(id);
        at += length;
    }
    if (options.add_eos && eos_ >= 0) out.push_back(eos_);
    return out;
}

void CharTokenizer::check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
        fail(kComponent, "token id {} is outside the vocabulary (0 to {})", id, tokens_.size() - 1);
}

std::string CharTokenizer::piece(int32_t id) const {
    check_id(id);
    return types_[id] == TokenType::normal ? tokens_[id] : std::string();
}

std::string CharTokenizer::decode(std::span<const int32_t> ids, bool /*from_start: no prefix to drop*/) const {
    std::string out;
    for (const int32_t id : ids) {
        check_id(id);
        if (types_[id] == TokenType::normal) out.append(tokens_[id]);
    }
    return out;
}

const std::string& CharTokenizer::token_text(int32_t id) const {
    check_id(id);
    return tokens_[id];
}

TokenType CharTokenizer::token_type(int32_t id) const {
    check_id(id);
    return types_[id];
}

std::vector<std::string> char_vocabulary_of(std::string_view text) {
    std::vector<bool> seen_ascii(128, false);
    std::vector<char32_t> others;
    for (size_t at = 0; at < text.size();) {
        const std::string_view rest = text.substr(at);
        const size_t length = require_char(rest, at);
        const char32_t cp = utf8_code_point(rest, length);
        if (cp < 128) seen_ascii[cp] = true;
        else others.push_back(cp);
        at += length;
    }
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    std::vector<std::string> out;
    for (char32_t cp = 0; cp < 128; ++cp)
        if (seen_ascii[cp]) out.emplace_back(1, static_cast<char>(cp));
    for (const char32_t cp : others) {
        out.emplace_back();
        utf8_append(out.back(), cp);
    }
    return out;
}

}  // namespace kiln
