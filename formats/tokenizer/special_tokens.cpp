#include "formats/tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/vocab_metadata.h"

namespace kiln {

namespace {

using Texts = std::vector<std::string_view>;

// The texts llama.cpp recognises (llama-vocab.cpp, load()).
const Texts kEotTexts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                             "<｜end▁of▁sentence｜>"};
const Texts kEomTexts = {"<|eom_id|>"};
const Texts kEogTexts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                             "<EOT>"};
const Texts kFimPreTexts = {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"};
const Texts kFimSufTexts = {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"};
const Texts kFimMidTexts = {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"};
const Texts kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<PAD>"};
const Texts kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"};
const Texts kFimSepTexts = {"<|file_sep|>"};

bool is_c_space(char c) noexcept { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string lower_ascii(std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

}  // namespace

bool SpecialTokens::is_eog(int32_t id) const noexcept {
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
}

SpecialTokens read_special_tokens(const GgufFile& file, const std::vector<std::string>& tokens,
                                  std::vector<TokenType> types, int32_t eos) {
    const size_t n = tokens.size();
    SpecialTokens out;
    // A text listed twice names its last id, as in llama.cpp's token_to_id.
    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(n);
    for (size_t i = 0; i < n; ++i) ids[tokens[i]] = static_cast<int32_t>(i);
    const auto make_control = [&](int32_t id) { types[id] = TokenType::control; };
    // The lowest id spelled one of `texts`, or -1.
    const auto find_first = [&](const Texts& texts) {
        int32_t best = -1;
        for (const std::string_view text : texts)
            if (const auto it = ids.find(text); it != ids.end() && (best < 0 || it->second < best)) best = it->second;
        return best;
    };
    const auto id_key = [&](std::string_view key, const Texts& texts) {
        int32_t id = vocab::optional_token_id(file, key, n);
        if (id < 0 && texts.size() > 0) {
            id = find_first(texts);
            if (id >= 0) make_control(id);
        }
        return id;
    };
    out.eot = id_key("tokenizer.ggml.eot_token_id", kEotTexts);
    out.eom = id_key("tokenizer.ggml.eom_token_id", kEomTexts);
    id_key("tokenizer.ggml.fim_pre_token_id", kFimPreTexts);
    id_key("tokenizer.ggml.fim_suf_token_id", kFimSufTexts);
    id_key("tokenizer.ggml.fim_mid_token_id", kFimMidTexts);
    const int32_t fim_pad = id_key("tokenizer.ggml.fim_pad_token_id", kFimPadTexts);
    const int32_t fim_rep = id_key("tokenizer.ggml.fim_rep_token_id", kFimRepTexts);
    const int32_t fim_sep = id_key("tokenizer.ggml.fim_sep_token_id", kFimSepTexts);

    for (const int32_t id : {fim_pad, fim_rep, fim_sep, eos, out.eot, out.eom})
        if (id >= 0) out.eog.push_back(id);
    for (const std::string_view text : kEogTexts) {
        if (const auto it = ids.find(text); it != ids.end()) {
            out.eog.push_back(it->second);
            make_control(it->second);
        }
    }
    std::sort(out.eog.begin(), out.eog.end());
    out.eog.erase(std::unique(out.eog.begin(), out.eog.end()), out.eog.end());

    for (size_t i = 0; i < n; ++i) {
        const TokenType t = types[i];
        if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown)
            out.by_length.push_back(static_cast<int32_t>(i));
    }
    std::stable_sort(out.by_length.begin(), out.by_length.end(),
                     [&](int32_t a, int32_t b) { return tokens[a].size() > tokens[b].size(); });

    // Strip flags by model and pre-tokenizer name (llama.cpp sets them so).
    out.strip.assign(n, 0);
    // llama.cpp refuses a vocabulary that lacks a token these rules name; so does kiln.
    const auto set_strip = [&](std::string_view text, uint8_t flag, bool on, std::string_view why) {
        const auto it = ids.find(text);
        if (it == ids.end())
            fail(vocab::kComponent, "{}: {} needs the token '{}', which the vocabulary lacks", file.name(), why,
                 printable(text));
        if (on) out.strip[it->second] |= flag;
        else out.strip[it->second] &= static_cast<uint8_t>(~flag);
    };
    const GgufValue* pre_value = file.find("tokenizer.ggml.pre");
    const std::string pre = pre_value != nullptr && pre_value->as_string() ? *pre_value->as_string() : "";
    const GgufValue* name_value = file.find("general.name");
    const std::string name = lower_ascii(name_value != nullptr && name_value->as_string() ? *name_value->as_string() : "");
    if (pre.find("jina-v2-de") != std::string::npos || pre.find("jina-v2-es") != std::string::npos ||
        pre.find("jina-v2-code") != std::string::npos) {
        set_strip("<mask>", SpecialTokens::kStripLeft, true, fmt::format("tokenizer.ggml.pre '{}'", printable(pre)));
    } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (const int32_t id : out.by_length) out.strip[id] |= SpecialTokens::kStripRight;
        const std::string why = fmt::format("a Phi-3 vocabulary (general.name '{}')", printable(name));
        set_strip("</s>", SpecialTokens::kStripRight, true, why);
        for (const std::string_view text : {"<unk>", "<s>", "<|endoftext|>"})
            set_strip(text, SpecialTokens::kStripRight, false, why);
    }
    out.types = std::move(types);
    return out;
}

std::vector<TextFragment> partition_special(std::string_view text, const SpecialTokens& special,
                                            const std::vector<std::string>& tokens, bool parse_special) {
    std::vector<TextFragment> fragments, next;
    if (text.empty()) return fragments;
    fragments.push_back({text, -1});
    for (const int32_t id : special.by_length) {
        const TokenType type = special.types[id];
        if (!parse_special && (type == TokenType::control || type == TokenType::unknown)) continue;
        const std::string_view token = tokens[id];
        if (token.empty()) continue;
        const bool strip_left = special.strip[id] & SpecialTokens::kStripLeft;
        const bool strip_right = special.strip[id] & SpecialTokens::kStripRight;
        next.clear();
        for (const TextFragment& fragment : fragments) {
            if (fragment.token >= 0 || fragment.text.find(token) == std::string_view::npos) {
                next.push_back(fragment);
                continue;
            }
            std::string_view rest = fragment.text;
            for (size_t at; !rest.empty() && (at = rest.find(token)) != std::string_view::npos;) {
                std::string_view left = rest.substr(0, at);
                if (strip_left)
                    while (!left.empty() && is_c_space(left.back())) left.remove_suffix(1);
                if (!left.empty()) next.push_back({left, -1});
                next.push_back({{}, id});
                rest.remove_prefix(at + token.size());
                if (strip_right)
                    while (!rest.empty() && is_c_space(rest.front())) rest.remove_prefix(1);
            }
            if (!rest.empty()) next.push_back({rest, -1});
        }
        fragments.swap(next);
    }
    return fragments;
}

}  // namespace kiln
