#include "formats/checkpoint/hf_tokenizer.h"

#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_folder.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The pre-tokenizer is ByteLevel itself or a Sequence holding one.
bool byte_level(const json& pre) {
    if (!pre.is_object()) return false;
    const auto type = pre.find("type");
    if (type == pre.end() || !type->is_string()) return false;
    if (*type == "ByteLevel") return true;
    if (*type == "Sequence")
        if (const auto list = pre.find("pretokenizers"); list != pre.end() && list->is_array())
            for (const json& p : *list)
                if (byte_level(p)) return true;
    return false;
}

std::optional<uint32_t> config_id(const json& config, std::string_view key, size_t n_tokens, const std::string& where) {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_unsigned() || it->get<uint64_t>() >= n_tokens)
        fail("tokenizer", "{}: config.json's {} {} is not a token id below {}", where, key, it->dump(), n_tokens);
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
             where, type == model->end() ? "unnamed" : type->dump());
    if (!byte_level(j.value("pre_tokenizer", json())))
        fail("tokenizer", "{}: the pre-tokenizer is not ByteLevel; kiln's gpt2 tokenizer is byte-level BPE", where);

    std::map<uint64_t, std::pair<std::string, int32_t>> by_id;
    const auto claim = [&](uint64_t id, const std::string& text, int32_t token_type) {
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
                  a.value("special", false) ? kControl : kUserDefined);
        }
    }
    if (by_id.empty()) fail("tokenizer", "{}: the vocabulary is empty", where);
    const uint64_t n = by_id.rbegin()->first + 1;
    if (n > vocab_rows)
        fail("tokenizer", "{}: token id {} is beyond the model's {} embedding rows (a different model's tokenizer?)", where,
             n - 1, vocab_rows);
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
    md.push_back({"tokenizer.ggml.pre", GgufValue("gpt-2")});
    md.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)});
    md.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
    md.push_back({"tokenizer.ggml.merges", gguf_array(GgufType::STRING, merges)});
    if (const auto bos = config_id(config, "bos_token_id", tokens.size(), where))
        md.push_back({"tokenizer.ggml.bos_token_id", GgufValue(*bos)});
    if (const auto eos = config_id(config, "eos_token_id", tokens.size(), where))
        md.push_back({"tokenizer.ggml.eos_token_id", GgufValue(*eos)});
    md.push_back({"tokenizer.ggml.add_bos_token", GgufValue(false)});
}

}  // namespace kiln
