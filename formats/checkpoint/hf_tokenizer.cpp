#include "formats/checkpoint/hf_tokenizer.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/checkpoint/json_limits.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The Split patterns of Hugging Face tokenizer.json files that llama.cpp's
// pre types implement (the same regexes, written with (?i:) as the files have them).
constexpr std::string_view kLlama3Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

std::string type_of(const json& step) {
    if (!step.is_object()) return "?";
    const auto t = step.find("type");
    return t != step.end() && t->is_string() ? t->get<std::string>() : "?";
}

// A true/false setting of a step, `fallback` when absent or null. Any other
// value is refused here: json::value() would throw nlohmann's own exception.
bool flag(const json& step, const char* key, bool fallback, const std::string& where) {
    const auto it = step.find(key);
    if (it == step.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail("tokenizer", "{}: the {} pre-tokenizer's {} is not true or false", where, type_of(step), key);
    return it->get<bool>();
}

// A ByteLevel step: whether it splits with GPT-2's regex itself (use_regex,
// default true); a prefix space is not something llama.cpp's types add.
bool byte_level_regex(const json& step, const std::string& where) {
    if (flag(step, "add_prefix_space", false, where))
        fail("tokenizer", "{}: the ByteLevel pre-tokenizer adds a prefix space, which no llama.cpp pre type does", where);
    return flag(step, "use_regex", true, where);
}

// tokenizer.ggml.pre for the file's pre_tokenizer: the llama.cpp type that
// splits text the same way, or kiln::Error naming what is not one.
std::string pre_type(const json& pre, const std::string& where) {
    std::vector<json> steps;
    if (type_of(pre) == "Sequence") {
        if (const auto list = pre.find("pretokenizers"); list != pre.end() && list->is_array())
            steps.assign(list->begin(), list->end());
    } else {
        steps.push_back(pre);
    }
    std::string shape;
    for (const json& step : steps) shape += (shape.empty() ? "" : ", ") + type_of(step);
    const auto refuse = [&](std::string_view why) -> std::string {
        fail("tokenizer", "{}: the pre-tokenizer [{}] {}; kiln maps GPT-2's ByteLevel, Llama 3's and Qwen2's "
             "Split patterns and SmolLM's Digits to llama.cpp's pre types (give --tokenizer a GGUF made by "
             "llama.cpp for others)", where, shape, why);
    };
    if (steps.size() == 1 && type_of(steps[0]) == "ByteLevel") {
        if (!byte_level_regex(steps[0], where)) refuse("does not split words");
        return "gpt-2";
    }
    if (steps.size() == 2 && type_of(steps[0]) == "Digits" && type_of(steps[1]) == "ByteLevel") {
        if (!flag(steps[0], "individual_digits", false, where) || !byte_level_regex(steps[1], where))
            refuse("is not SmolLM's (single digits, then GPT-2's split)");
        return "smollm";
    }
    if (steps.size() == 2 && type_of(steps[0]) == "Split" && type_of(steps[1]) == "ByteLevel") {
        const json& split = steps[0];
        const auto pattern = split.find("pattern");
        const bool regex = pattern != split.end() && pattern->is_object() && pattern->contains("Regex") &&
                           (*pattern)["Regex"].is_string();
        const auto behavior = split.find("behavior");
        const bool isolated = behavior != split.end() && *behavior == "Isolated";
        if (!regex || !isolated || flag(split, "invert", false, where) ||
            byte_level_regex(steps[1], where))
            refuse("is not a single isolating regex before a plain byte-level step");
        const std::string r = (*pattern)["Regex"].get<std::string>();
        if (r == kLlama3Split) return "llama-bpe";
        if (r == kQwen2Split) return "qwen2";
        return refuse(fmt::format("splits by the regex '{}', which is not one kiln knows", printable(r.substr(0, 80))));
    }
    return refuse("is not one kiln knows");
}

std::optional<uint32_t> config_id(const json& config, std::string_view key, size_t n_tokens, const std::string& where) {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_unsigned() || it->get<uint64_t>() >= n_tokens)
        fail("tokenizer", "{}: config.json's {} {} is not a token id below {}", where, key, json_excerpt(*it), n_tokens);
    return static_cast<uint32_t>(it->get<uint64_t>());
}

}  // namespace

void add_hf_bpe_tokenizer(Checkpoint& checkpoint, const std::filesystem::path& path, const json& config,
                          uint64_t vocab_rows) {
    const std::string where = path.string();
    const json j = read_hf_json(path);
    const auto model = j.find("model");
    if (!j.is_object() || model == j.end() || !model->is_object()) fail("tokenizer", "{}: no \"model\" object", where);
    const auto type = model->find("type");
    if (type == model->end() || *type != "BPE")
        fail("tokenizer", "{}: the tokenizer model is {}; kiln embeds byte-level BPE (GPT-2) tokenizers from tokenizer.json",
             where, type == model->end() ? "unnamed" : json_excerpt(*type));
    const std::string pre = pre_type(j.value("pre_tokenizer", json()), where);

    std::map<uint64_t, std::pair<std::string, int32_t>> by_id;
    // Each id is checked as it is read: a bound on the largest id alone would
    // wrap for an id of 2^64 - 1 (its "+ 1" is 0) and let it index the table.
    const auto claim = [&](uint64_t id, const std::string& text, int32_t token_type) {
        if (id >= vocab_rows)
            fail("tokenizer", "{}: token '{}' has id {}, beyond the model's {} embedding rows (a different model's "
                 "tokenizer?)", where, printable(text, 80), id, vocab_rows);
        const auto [it, fresh] = by_id.emplace(id, std::make_pair(text, token_type));
        if (!fresh && it->second.first != text)
            fail("tokenizer", "{}: id {} is both '{}' and '{}'", where, id, printable(it->second.first), printable(text));
        it->second.second = token_type;  // an added token's type wins over the vocabulary's
    };
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) fail("tokenizer", "{}: model.vocab is not an object", where);
    for (const auto& [text, id] : vocab->items()) {
        if (!id.is_number_unsigned()) fail("tokenizer", "{}: model.vocab['{}'] is not an id", where, printable(text));
        claim(id.get<uint64_t>(), text, kNormal);
    }
    if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array()) {
        for (const json& a : *added) {
            if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
                !a["content"].is_string())
                fail("tokenizer", "{}: an added_tokens entry has no id or content", where);
            claim(a["id"].get<uint64_t>(), a["content"].get<std::string>(),
                  a.contains("special") && a["special"] == true ? kControl : kUserDefined);
        }
    }
    if (by_id.empty()) fail("tokenizer", "{}: the vocabulary is empty", where);
    std::vector<std::string> tokens(vocab_rows);
    std::vector<int32_t> types(vocab_rows, kUnused);
    for (uint64_t id = 0; id < vocab_rows; ++id) tokens[id] = fmt::format("<unused_{}>", id);
    for (const auto& [id, token] : by_id) {
        tokens[id] = token.first;
        types[id] = token.second;
    }

    std::vector<std::string> merges;
    const auto m = model->find("merges");
    if (m == model->end() || !m->is_array()) fail("tokenizer", "{}: model.merges is not a list", where);
    for (const json& merge : *m) {
        if (merge.is_string()) {
            const std::string s = merge.get<std::string>();
            if (s.find(' ') == std::string::npos || s.front() == ' ' || s.back() == ' ')
                fail("tokenizer", "{}: merge '{}' is not two tokens separated by a space", where, printable(s));
            merges.push_back(s);
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
            merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
        } else {
            fail("tokenizer", "{}: a merge is neither \"a b\" nor [\"a\", \"b\"]", where);
        }
    }

    auto& md = checkpoint.metadata;
    md.push_back({"tokenizer.ggml.model", GgufValue("gpt2")});
    md.push_back({"tokenizer.ggml.pre", GgufValue(pre)});
    md.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)});
    md.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
    md.push_back({"tokenizer.ggml.merges", gguf_array(GgufType::STRING, merges)});
    if (const auto bos = config_id(config, "bos_token_id", tokens.size(), where))
        md.push_back({"tokenizer.ggml.bos_token_id", GgufValue(*bos)});
    if (const auto eos = config_id(config, "eos_token_id", tokens.size(), where))
        md.push_back({"tokenizer.ggml.eos_token_id", GgufValue(*eos)});
    md.push_back({"tokenizer.ggml.add_bos_token", GgufValue(false)});
}

namespace {

// Replaces the entry `key` or appends it.
void set_entry(std::vector<GgufEntry>& md, const std::string& key, GgufValue value) {
    for (GgufEntry& e : md)
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    md.push_back({key, std::move(value)});
}

}  // namespace

void add_hf_tokenizer_config(Checkpoint& checkpoint, const std::filesystem::path& path) {
    const std::string where = path.string();
    const json j = read_hf_json(path);
    if (!j.is_object()) fail("tokenizer", "{}: not a JSON object", where);
    auto& md = checkpoint.metadata;
    const GgufArray* tokens = nullptr;
    for (const GgufEntry& e : md)
        if (e.key == "tokenizer.ggml.tokens") tokens = e.value.as_array();
    if (tokens == nullptr) fail("tokenizer", "{}: there is no vocabulary to configure", where);
    const GgufArray vocabulary = *tokens;  // md grows below (chat templates): keep no pointer into it
    tokens = &vocabulary;

    if (const auto t = j.find("chat_template"); t != j.end() && !t->is_null()) {
        if (t->is_string()) {
            set_entry(md, "tokenizer.chat_template", GgufValue(t->get<std::string>()));
        } else if (t->is_array()) {
            for (const json& named : *t) {
                if (!named.is_object() || !named.contains("name") || !named["name"].is_string() ||
                    !named.contains("template") || !named["template"].is_string())
                    fail("tokenizer", "{}: a chat_template entry is not {{\"name\": ..., \"template\": ...}}", where);
                const std::string name = named["name"].get<std::string>();
                set_entry(md, name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name,
                          GgufValue(named["template"].get<std::string>()));
            }
        } else {
            fail("tokenizer", "{}: chat_template is neither a string nor a list of named templates", where);
        }
    }
    // The special tokens are named by text: their ids are where the vocabulary has them.
    for (const auto& [field, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                     std::pair{"eos_token", "tokenizer.ggml.eos_token_id"},
                                     std::pair{"unk_token", "tokenizer.ggml.unknown_token_id"},
                                     std::pair{"pad_token", "tokenizer.ggml.padding_token_id"}}) {
        const auto it = j.find(field);
        if (it == j.end() || it->is_null()) continue;
        const json& content = it->is_object() ? it->value("content", json()) : *it;
        if (!content.is_string()) fail("tokenizer", "{}: {} is not a token's text", where, field);
        const std::string text = content.get<std::string>();
        std::optional<uint32_t> id;
        for (size_t i = 0; i < tokens->items.size() && !id; ++i)
            if (const auto* s = tokens->items[i].as_string(); s != nullptr && *s == text) id = static_cast<uint32_t>(i);
        if (!id) fail("tokenizer", "{}: {} '{}' is not in the vocabulary", where, field, printable(text));
        set_entry(md, key, GgufValue(*id));
    }
    for (const auto& [field, key] : {std::pair{"add_bos_token", "tokenizer.ggml.add_bos_token"},
                                     std::pair{"add_eos_token", "tokenizer.ggml.add_eos_token"}}) {
        const auto it = j.find(field);
        if (it == j.end() || it->is_null()) continue;
        if (!it->is_boolean()) fail("tokenizer", "{}: {} is not true or false", where, field);
        set_entry(md, key, GgufValue(it->get<bool>()));
    }
}

}  // namespace kiln
