#include "formats/checkpoint/char_vocabulary.h"

#include <fstream>
#include <map>
#include <set>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/pickle.h"
#include "formats/io/mapped_file.h"
#include "formats/io/regular_file.h"
#include "formats/tokenizer/utf8.h"

namespace kiln {
namespace {

using pickle::Kind;
using pickle::Value;

// GGUF token types, as llama.cpp numbers them (SentencePiece's).
constexpr int32_t kNormal = 1, kControl = 3;

const Value* dict_item(const pickle::Pickle& p, Value dict, std::string_view key) {
    for (const auto& [k, v] : p.dict(dict))
        if (k.kind == Kind::String && p.string(k) == key) return &v;
    return nullptr;
}

}  // namespace

bool looks_like_pickle(const std::filesystem::path& path) {
    const std::string head = read_file_head(path, 1);
    return !head.empty() && static_cast<unsigned char>(head[0]) == 0x80;
}

CharVocabulary read_nanogpt_meta(const std::filesystem::path& path) {
    const MappedFile file(path);
    const std::string name = path.string();
    const pickle::Pickle p = pickle::unpickle(file.bytes(), name);
    if (p.root.kind != Kind::Dict) fail("tokenizer", "{}: not a nanoGPT meta.pkl (the pickle holds a {}, not a dict)", name, kind_name(p.root.kind));
    std::map<int64_t, std::string> by_id;
    if (const Value* itos = dict_item(p, p.root, "itos")) {
        if (itos->kind != Kind::Dict) fail("tokenizer", "{}: \"itos\" is a {}, not a dict", name, kind_name(itos->kind));
        for (const auto& [k, v] : p.dict(*itos)) {
            if (k.kind != Kind::Int || v.kind != Kind::String)
                fail("tokenizer", "{}: \"itos\" must map int ids to str, found {} -> {}", name, kind_name(k.kind), kind_name(v.kind));
            if (!by_id.emplace(k.integer, p.string(v)).second) fail("tokenizer", "{}: id {} appears twice", name, k.integer);
        }
    } else if (const Value* stoi = dict_item(p, p.root, "stoi")) {
        if (stoi->kind != Kind::Dict) fail("tokenizer", "{}: \"stoi\" is a {}, not a dict", name, kind_name(stoi->kind));
        for (const auto& [k, v] : p.dict(*stoi)) {
            if (k.kind != Kind::String || v.kind != Kind::Int)
                fail("tokenizer", "{}: \"stoi\" must map str to int ids, found {} -> {}", name, kind_name(k.kind), kind_name(v.kind));
            if (!by_id.emplace(v.integer, p.string(k)).second) fail("tokenizer", "{}: id {} appears twice", name, v.integer);
        }
    } else {
        fail("tokenizer", "{}: not a nanoGPT meta.pkl (no \"itos\" or \"stoi\")", name);
    }
    CharVocabulary v;
    for (const auto& [id, token] : by_id) {
        if (id != static_cast<int64_t>(v.tokens.size()))
            fail("tokenizer", "{}: token ids are not 0..{} without gaps (id {} is missing)", name, by_id.size() - 1, v.tokens.size());
        v.tokens.push_back(token);
        v.control.push_back(false);
    }
    return v;
}

void add_char_tokenizer(Checkpoint& checkpoint, const CharVocabulary& v, uint64_t vocab_size, const std::string& where) {
    if (v.tokens.size() != vocab_size)
        fail("tokenizer", "{}: the vocabulary has {} tokens but the model's embedding has {} rows (a different model's vocabulary?)",
             where, v.tokens.size(), vocab_size);
    std::set<std::string_view> seen;
    std::vector<int32_t> types;
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string& t = v.tokens[id];
        if (!seen.insert(t).second) fail("tokenizer", "{}: token '{}' appears twice (id {})", where, printable(t), id);
        if (v.control[id]) {
            types.push_back(kControl);
            continue;
        }
        const bool one_character = !t.empty() && utf8_scan(t).status == Utf8Status::complete && utf8_scan(t).length == t.size();
        if (!one_character)
            fail("tokenizer", "{}: token {} '{}' is not exactly one UTF-8 character (a character vocabulary needs that, "
                 "except for special tokens)", where, id, printable(t));
        types.push_back(kNormal);
    }
    using Special = std::pair<const char*, std::optional<uint32_t>>;
    for (const auto& [key, id] : std::initializer_list<Special>{{"bos", v.bos}, {"eos", v.eos}, {"padding", v.pad}, {"unknown", v.unk}})
        if (id && *id >= vocab_size) fail("tokenizer", "{}: the {} token id {} is outside the vocabulary", where, key, *id);
    auto& md = checkpoint.metadata;
    md.push_back({"tokenizer.ggml.model", GgufValue("char")});
    md.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, v.tokens)});
    md.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
    if (v.bos) md.push_back({"tokenizer.ggml.bos_token_id", GgufValue(*v.bos)});
    if (v.eos) md.push_back({"tokenizer.ggml.eos_token_id", GgufValue(*v.eos)});
    if (v.pad) md.push_back({"tokenizer.ggml.padding_token_id", GgufValue(*v.pad)});
    if (v.unk) md.push_back({"tokenizer.ggml.unknown_token_id", GgufValue(*v.unk)});
    md.push_back({"tokenizer.ggml.add_bos_token", GgufValue(false)});
}

}  // namespace kiln
