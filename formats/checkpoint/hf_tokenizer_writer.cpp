#include "formats/checkpoint/hf_tokenizer_writer.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/spm_model_writer.h"

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

// The Split regexes hf_tokenizer.cpp maps to llama-bpe and qwen2 (the same
// strings; the round-trip tests check that the reader maps these back).
constexpr std::string_view kLlama3Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

class Vocabulary {
public:
    explicit Vocabulary(const std::vector<GgufEntry>& md) {
        for (const GgufEntry& e : md) by_key_[e.key] = &e.value;
    }

    const GgufValue* find(const std::string& key) const {
        const auto it = by_key_.find(key);
        return it == by_key_.end() ? nullptr : it->second;
    }

    std::string string(const std::string& key) const {
        const GgufValue* v = find(key);
        if (v == nullptr || v->as_string() == nullptr) fail("tokenizer", "cannot export the vocabulary: {} is not a string", key);
        return *v->as_string();
    }

    std::vector<std::string> strings(const std::string& key, bool required) const {
        std::vector<std::string> out;
        const GgufValue* v = find(key);
        if (v == nullptr && !required) return out;
        const GgufArray* a = v != nullptr ? v->as_array() : nullptr;
        if (a == nullptr) fail("tokenizer", "cannot export the vocabulary: {} is not a list of strings", key);
        for (const GgufValue& item : a->items) {
            if (item.as_string() == nullptr) fail("tokenizer", "cannot export the vocabulary: {} holds a non-string", key);
            out.push_back(*item.as_string());
        }
        return out;
    }

    // A per-token list of `n` numbers, or `fallback` for each when absent.
    template <typename T>
    std::vector<T> numbers(const std::string& key, size_t n, T fallback) const {
        const GgufValue* v = find(key);
        if (v == nullptr) return std::vector<T>(n, fallback);
        const GgufArray* a = v->as_array();
        if (a == nullptr || a->items.size() != n)
            fail("tokenizer", "cannot export the vocabulary: {} is not a list of {} numbers", key, n);
        std::vector<T> out;
        for (const GgufValue& item : a->items) {
            const auto x = item.as_number();
            if (!x) fail("tokenizer", "cannot export the vocabulary: {} holds a non-number", key);
            out.push_back(static_cast<T>(*x));
        }
        return out;
    }

    // A token id key: nullopt when absent, -1 when it names no token (llama.cpp's 4294967295 = none).
    std::optional<int64_t> id(const std::string& key, size_t n) const {
        const GgufValue* v = find(key);
        if (v == nullptr) return std::nullopt;
        const auto x = v->as_int();
        if (!x || *x < 0 || static_cast<uint64_t>(*x) >= n) return -1;
        return *x;
    }

    std::optional<bool> flag(const std::string& key) const {
        const GgufValue* v = find(key);
        if (v == nullptr) return std::nullopt;
        if (!v->as_bool()) fail("tokenizer", "cannot export the vocabulary: {} is not true or false", key);
        return v->as_bool();
    }

    const std::map<std::string, const GgufValue*>& all() const { return by_key_; }

private:
    std::map<std::string, const GgufValue*> by_key_;
};

// The chat template(s): a string, or HF's list of named templates when there are named ones.
Json chat_templates(const Vocabulary& v) {
    Json list = Json::array();
    std::string main;
    bool has_main = false;
    for (const auto& [key, value] : v.all()) {
        if (key == "tokenizer.chat_template") {
            main = v.string(key);
            has_main = true;
        } else if (key.starts_with("tokenizer.chat_template.")) {
            list.push_back({{"name", key.substr(std::string_view("tokenizer.chat_template.").size())},
                            {"template", v.string(key)}});
        }
    }
    if (list.empty()) return has_main ? Json(main) : Json(nullptr);
    if (has_main) list.insert(list.begin(), Json{{"name", "default"}, {"template", main}});
    return list;
}

// The special tokens' texts in tokenizer_config.json and their ids in config.json.
void special_tokens(Json& config, HfTokenizerFiles& out, const std::vector<std::string>& tokens,
                    const std::map<std::string, int64_t>& ids) {
    for (const auto& [field, id_field] : {std::pair{"bos_token", "bos_token_id"}, std::pair{"eos_token", "eos_token_id"},
                                          std::pair{"unk_token", ""}, std::pair{"pad_token", "pad_token_id"},
                                          std::pair{"sep_token", ""}}) {
        const auto it = ids.find(field);
        if (it == ids.end() || it->second < 0) continue;
        const std::string& text = tokens[static_cast<size_t>(it->second)];
        config[field] = text;
        if (*id_field != '\0') out.special_ids[id_field] = it->second;
        // kiln's reader (and HF's) find a special token by its text: the first token with it.
        for (int64_t i = 0; i < it->second; ++i)
            if (tokens[static_cast<size_t>(i)] == text) {
                out.notes.push_back(fmt::format("{} is token {} but token {} has the same text '{}': read back, it is {}",
                                                field, it->second, i, printable(text), i));
                break;
            }
    }
}

// tokenizer.* keys this export does not write, when they say something.
void note_unwritten(const Vocabulary& v, HfTokenizerFiles& out, std::initializer_list<std::string_view> written) {
    for (const auto& [key, value] : v.all()) {
        if (!key.starts_with("tokenizer.") || key.starts_with("tokenizer.chat_template")) continue;
        bool known = false;
        for (std::string_view w : written) known |= key == w;
        if (known) continue;
        if (key.ends_with("_token_id") && value->as_int() && *value->as_int() == 4294967295) continue;  // none
        out.notes.push_back(fmt::format("{} has no place in the Hugging Face files: not written", key));
    }
}

std::string dump(const Json& j) { return j.dump(2, ' ', false) + "\n"; }

void spm_files(const Vocabulary& v, std::string_view architecture, HfTokenizerFiles& out) {
    SpmModel m;
    m.pieces = v.strings("tokenizer.ggml.tokens", true);
    const size_t n = m.pieces.size();
    if (n == 0 || n > 0x7fffffff) fail("tokenizer", "cannot export the vocabulary: {} tokens", n);
    m.scores = v.numbers<float>("tokenizer.ggml.scores", n, 0.0f);
    m.types = v.numbers<int32_t>("tokenizer.ggml.token_type", n, kNormal);
    // llama.cpp's SentencePiece defaults where a key is absent.
    const auto id = [&](const char* key, int64_t fallback) {
        return static_cast<int32_t>(v.id(key, n).value_or(fallback));
    };
    m.unk_id = id("tokenizer.ggml.unknown_token_id", 0);
    m.bos_id = id("tokenizer.ggml.bos_token_id", 1);
    m.eos_id = id("tokenizer.ggml.eos_token_id", 2);
    m.pad_id = id("tokenizer.ggml.padding_token_id", -1);
    m.add_dummy_prefix = v.flag("tokenizer.ggml.add_space_prefix").value_or(true);
    SpmWriteOptions options;
    options.remove_extra_whitespaces = v.flag("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    if (const auto bytes = std::count(m.types.begin(), m.types.end(), 6); bytes != 0 && bytes != 256)
        out.notes.push_back(fmt::format("the vocabulary has {} byte tokens, not 256: kiln and llama.cpp read the "
                                        "tokenizer.model, SentencePiece itself refuses it (byte_fallback wants all 256)",
                                        bytes));
    const std::vector<std::byte> proto = write_spm_model(m, options);
    out.files.emplace_back("tokenizer.model", std::string(reinterpret_cast<const char*>(proto.data()), proto.size()));

    Json config;
    config["add_bos_token"] = v.flag("tokenizer.ggml.add_bos_token").value_or(true);
    config["add_eos_token"] = v.flag("tokenizer.ggml.add_eos_token").value_or(false);
    std::map<std::string, int64_t> ids = {{"bos_token", m.bos_id}, {"eos_token", m.eos_id}, {"unk_token", m.unk_id},
                                          {"pad_token", m.pad_id}};
    if (const auto sep = v.id("tokenizer.ggml.seperator_token_id", n); sep && *sep >= 0) {
        ids["sep_token"] = *sep;
        out.notes.push_back("tokenizer.ggml.seperator_token_id is written as sep_token, which kiln's reader does not take back");
    }
    special_tokens(config, out, m.pieces, ids);
    if (Json t = chat_templates(v); !t.is_null()) config["chat_template"] = t;
    config["clean_up_tokenization_spaces"] = false;
    config["sp_model_kwargs"] = Json::object();
    config["tokenizer_class"] = architecture.starts_with("gemma") ? "GemmaTokenizer" : "LlamaTokenizer";
    out.files.emplace_back("tokenizer_config.json", dump(config));
    note_unwritten(v, out, {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                            "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id",
                            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id",
                            "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                            "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.remove_extra_whitespaces"});
}

Json byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", trim_offsets},
            {"use_regex", use_regex}};
}

// The inverse of hf_tokenizer.cpp's pre_type().
Json pre_tokenizer(const std::string& pre) {
    if (pre == "gpt-2") return byte_level(false, true, true);
    if (pre == "llama-bpe" || pre == "qwen2") {
        const Json split = {{"type", "Split"},
                            {"pattern", {{"Regex", pre == "qwen2" ? kQwen2Split : kLlama3Split}}},
                            {"behavior", "Isolated"},
                            {"invert", false}};
        return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level(false, true, false)}}};
    }
    if (pre == "smollm")
        return {{"type", "Sequence"},
                {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(false, true, true)}}};
    fail("tokenizer", "cannot export the vocabulary: tokenizer.ggml.pre '{}' has no Hugging Face pre_tokenizer kiln "
         "writes (gpt-2, llama-bpe, qwen2, smollm)", printable(pre));
}

void bpe_files(const Vocabulary& v, std::string_view architecture, HfTokenizerFiles& out) {
    if (v.find("tokenizer.ggml.pre") == nullptr)
        fail("tokenizer", "cannot export the vocabulary: it has no tokenizer.ggml.pre (llama.cpp's 'default' "
             "pre-tokenizer), which no Hugging Face pre_tokenizer kiln writes matches (gpt-2, llama-bpe, qwen2, smollm)");
    const std::string pre = v.string("tokenizer.ggml.pre");
    Json tokenizer;
    tokenizer["version"] = "1.0";
    tokenizer["truncation"] = nullptr;
    tokenizer["padding"] = nullptr;
    const std::vector<std::string> tokens = v.strings("tokenizer.ggml.tokens", true);
    const size_t n = tokens.size();
    if (n == 0) fail("tokenizer", "cannot export the vocabulary: no tokens");
    const std::vector<int32_t> types = v.numbers<int32_t>("tokenizer.ggml.token_type", n, kNormal);
    Json added = Json::array(), vocab = Json::object();
    std::map<std::string, size_t> seen;
    size_t odd = 0;
    for (size_t i = 0; i < n; ++i) {
        const std::string& text = tokens[i];
        if (types[i] == kControl || types[i] == kUserDefined) {
            const bool special = types[i] == kControl;
            added.push_back({{"id", i}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                             {"normalized", !special}, {"special", special}});
            continue;
        }
        if (types[i] == kUnused && text == fmt::format("<unused_{}>", i)) continue;  // the reader pads these back
        if (types[i] != kNormal) ++odd;
        if (const auto [it, fresh] = seen.emplace(text, i); !fresh)
            fail("tokenizer", "cannot export the vocabulary: tokens {} and {} are both '{}'; tokenizer.json's vocab "
                 "names each text once", it->second, i, printable(text));
        vocab[text] = i;
    }
    if (odd != 0)
        out.notes.push_back(fmt::format("{} tokens of types other than normal, control, user-defined and "
                                        "<unused_N> are in tokenizer.json's vocab: read back, they are normal", odd));
    tokenizer["added_tokens"] = added;
    tokenizer["normalizer"] = nullptr;
    tokenizer["pre_tokenizer"] = pre_tokenizer(pre);

    const auto bos = v.id("tokenizer.ggml.bos_token_id", n), eos = v.id("tokenizer.ggml.eos_token_id", n);
    const bool add_bos = v.flag("tokenizer.ggml.add_bos_token").value_or(pre == "llama-bpe");
    const std::optional<bool> add_eos = v.flag("tokenizer.ggml.add_eos_token");
    // Llama 3's post-processor: ByteLevel, then the BOS (and EOS) the tokenizer adds.
    Json single = Json::array(), pair = Json::array(), specials = Json::object();
    const auto special = [&](int64_t id, int type_id, Json& into) {
        const std::string& text = tokens[static_cast<size_t>(id)];
        into.push_back({{"SpecialToken", {{"id", text}, {"type_id", type_id}}}});
        specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
    };
    const bool with_bos = add_bos && bos.value_or(-1) >= 0, with_eos = add_eos.value_or(false) && eos.value_or(-1) >= 0;
    const auto sequence = [&](int type_id, Json& into) {
        if (with_bos) special(*bos, type_id, into);
        into.push_back({{"Sequence", {{"id", type_id == 0 ? "A" : "B"}, {"type_id", type_id}}}});
        if (with_eos) special(*eos, type_id, into);
    };
    sequence(0, single);
    sequence(0, pair);
    sequence(1, pair);
    if (with_bos || with_eos)
        tokenizer["post_processor"] = {{"type", "Sequence"},
                                       {"processors",
                                        {byte_level(true, false, true),
                                         {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
                                          {"special_tokens", specials}}}}};
    else
        tokenizer["post_processor"] = byte_level(true, false, true);
    tokenizer["decoder"] = byte_level(true, true, true);
    Json model;
    model["type"] = "BPE";
    model["dropout"] = nullptr;
    model["unk_token"] = nullptr;
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = false;
    model["byte_fallback"] = false;
    model["ignore_merges"] = pre == "llama-bpe";
    model["vocab"] = vocab;
    model["merges"] = v.strings("tokenizer.ggml.merges", false);
    tokenizer["model"] = model;
    out.files.emplace_back("tokenizer.json", dump(tokenizer));

    Json config;
    config["add_bos_token"] = add_bos;
    if (add_eos) config["add_eos_token"] = *add_eos;
    std::map<std::string, int64_t> ids;
    for (const auto& [field, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                     std::pair{"eos_token", "tokenizer.ggml.eos_token_id"},
                                     std::pair{"unk_token", "tokenizer.ggml.unknown_token_id"},
                                     std::pair{"pad_token", "tokenizer.ggml.padding_token_id"}})
        if (const auto id = v.id(key, n)) ids[field] = *id;
    special_tokens(config, out, tokens, ids);
    if (Json t = chat_templates(v); !t.is_null()) config["chat_template"] = t;
    config["clean_up_tokenization_spaces"] = false;
    config["tokenizer_class"] = architecture == "gpt2" ? "GPT2Tokenizer" : "PreTrainedTokenizerFast";
    out.files.emplace_back("tokenizer_config.json", dump(config));
    note_unwritten(v, out, {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                            "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.unknown_token_id",
                            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
                            "tokenizer.ggml.add_eos_token"});
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files(const std::vector<GgufEntry>& metadata, std::string_view architecture) {
    HfTokenizerFiles out;
    const Vocabulary v(metadata);
    if (v.find("tokenizer.ggml.model") == nullptr) return out;
    out.has_vocabulary = true;
    out.model = v.string("tokenizer.ggml.model");
    if (out.model == "llama") spm_files(v, architecture, out);
    else if (out.model == "gpt2") bpe_files(v, architecture, out);
    else
        out.notes.push_back(fmt::format("the {}vocabulary (tokenizer.ggml.model '{}') has no Hugging Face tokenizer "
                                        "file kiln writes: none written",
                                        out.model == "char" ? "character " : "", printable(out.model)));
    return out;
}

}  // namespace kiln
