// Vocabularies kiln-convert embeds: nanoGPT's meta.pkl and a seq2seq
// checkpoint's itos list ("char"), Hugging Face tokenizer.json ("gpt2": tokens,
// merges, special ids) and tokenizer.model (SentencePiece protobuf, "llama").
// The round trips are checked against what the Python fixture scripts wrote:
// the prompts' texts and the token ids PyTorch's side computed for them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <functional>

#include "engine/core/error.h"
#include "formats/checkpoint/char_vocabulary.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/gguf/gguf_file.h"
#include "support/error_check.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/tensor_data.h"

#include <nlohmann/json.hpp>

using namespace kiln;
using test::shell_quote;

namespace {

std::filesystem::path convert(const test::TempDir& dir, const std::filesystem::path& input, const std::string& extra = "") {
    const auto out = dir.path() / (input.filename().string() + ".gguf");
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} {}", shell_quote(input.string()),
                                                                shell_quote(out.string()), extra));
    INFO(run.err);
    REQUIRE(run.status == 0);
    return out;
}

std::vector<std::string> strings(const GgufFile& f, std::string_view key) {
    const GgufValue* v = f.find(key);
    REQUIRE(v != nullptr);
    REQUIRE(v->as_array() != nullptr);
    std::vector<std::string> out;
    for (const GgufValue& item : v->as_array()->items) out.push_back(*item.as_string());
    return out;
}

std::vector<int64_t> ints(const GgufFile& f, std::string_view key) {
    const GgufValue* v = f.find(key);
    REQUIRE(v != nullptr);
    REQUIRE(v->as_array() != nullptr);
    std::vector<int64_t> out;
    for (const GgufValue& item : v->as_array()->items) out.push_back(*item.as_int());
    return out;
}

// The UTF-8 characters of `text`, one string each.
std::vector<std::string> characters(const std::string& text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size();) {
        size_t n = 1;
        const auto lead = static_cast<unsigned char>(text[i]);
        if (lead >= 0xf0) n = 4;
        else if (lead >= 0xe0) n = 3;
        else if (lead >= 0xc0) n = 2;
        out.push_back(text.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace

TEST_CASE("nanoGPT meta.pkl becomes a char vocabulary that encodes the prompts as PyTorch did", "[convert][tokenizer]") {
    test::TempDir dir;
    const auto fixtures = test::fixtures_dir() / "gpt2";
    const GgufFile f = GgufFile::open(convert(dir, fixtures / "nanogpt_bias.pt",
                                              "--tokenizer " + shell_quote((fixtures / "meta.pkl").string())));
    CHECK(f.get_string("tokenizer.ggml.model") == "char");
    const auto tokens = strings(f, "tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 65);
    CHECK(tokens[0] == "\n");
    CHECK(tokens[1] == " ");
    CHECK(tokens[64] == "z");
    for (int64_t type : ints(f, "tokenizer.ggml.token_type")) CHECK(type == 1);
    CHECK(f.find("tokenizer.ggml.bos_token_id") == nullptr);
    CHECK(f.find("tokenizer.ggml.eos_token_id") == nullptr);
    const GgufFile ref = GgufFile::open(fixtures / "nanogpt_bias_reference.gguf");
    for (int p = 0; p < 2; ++p) {
        const auto ids = test::values_of<int32_t>(ref.get_tensor(fmt::format("p{}.tokens", p)));
        const auto chars = characters(ref.get_string(fmt::format("p{}.text", p)));
        REQUIRE(chars.size() == ids.size());
        for (size_t i = 0; i < ids.size(); ++i) CHECK(tokens[ids[i]] == chars[i]);
    }
}

TEST_CASE("a seq2seq checkpoint's itos and specials become a char vocabulary with control tokens", "[convert][tokenizer]") {
    test::TempDir dir;
    const auto fixtures = test::fixtures_dir() / "transformer";
    const GgufFile f = GgufFile::open(convert(dir, fixtures / "postln_relu.pt"));
    CHECK(f.get_string("tokenizer.ggml.model") == "char");
    const auto tokens = strings(f, "tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 30);
    CHECK(tokens[0] == "<pad>");
    CHECK(tokens[1] == "<s>");
    CHECK(tokens[2] == "</s>");
    const auto types = ints(f, "tokenizer.ggml.token_type");
    CHECK(types == std::vector<int64_t>{3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    CHECK(f.get_int("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f.get_int("tokenizer.ggml.eos_token_id") == 2);
    CHECK(f.get_int("tokenizer.ggml.padding_token_id") == 0);
    const GgufFile ref = GgufFile::open(fixtures / "postln_relu_reference.gguf");
    for (int s = 0; s < 4; ++s) {
        const auto ids = test::values_of<int32_t>(ref.get_tensor(fmt::format("s{}.tokens", s)));
        const auto chars = characters(ref.get_string(fmt::format("s{}.text", s)));
        REQUIRE(chars.size() + 1 == ids.size());  // + </s>
        for (size_t i = 0; i < chars.size(); ++i) CHECK(tokens[ids[i]] == chars[i]);
        CHECK(ids.back() == 2);
    }
    // A meta.pkl cannot replace a vocabulary the checkpoint already holds.
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --tokenizer {}",
                                                                shell_quote((fixtures / "postln_relu.pt").string()),
                                                                shell_quote((dir.path() / "x.gguf").string()),
                                                                shell_quote((test::fixtures_dir() / "gpt2" / "meta.pkl").string())));
    CHECK(run.status == 1);
    CHECK(run.err.find("already holds a vocabulary; --tokenizer") != std::string::npos);
}

TEST_CASE("tokenizer.json becomes a gpt2 vocabulary: tokens, merges, special ids", "[convert][tokenizer][gpt2]") {
    test::TempDir dir;
    const auto fixtures = test::fixtures_dir() / "gpt2";
    const GgufFile f = GgufFile::open(convert(dir, fixtures / "gpt2_hf"));
    CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
    const auto tokens = strings(f, "tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 297);
    CHECK(tokens[0] == "!");             // GPT-2's bytes_to_unicode order starts at '!'
    CHECK(tokens[188] == "\xC4\x80");    // U+0100, the first remapped byte (0x00)
    CHECK(tokens[296] == "<|endoftext|>");
    const auto types = ints(f, "tokenizer.ggml.token_type");
    CHECK(types[296] == 3);
    CHECK(types[0] == 1);
    CHECK(f.get_int("tokenizer.ggml.bos_token_id") == 296);
    CHECK(f.get_int("tokenizer.ggml.eos_token_id") == 296);
    // Merges: the file's, in order, each "left right" with right+left a token.
    std::ifstream in(fixtures / "gpt2_hf" / "tokenizer.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    const auto merges = strings(f, "tokenizer.ggml.merges");
    REQUIRE(merges.size() == j["model"]["merges"].size());
    for (size_t i = 0; i < merges.size(); ++i) {
        CHECK(merges[i] == j["model"]["merges"][i].get<std::string>());
        const std::string joined = merges[i].substr(0, merges[i].find(' ')) + merges[i].substr(merges[i].find(' ') + 1);
        CHECK(tokens[256 + i] == joined);  // learned merges were appended to the vocabulary in rank order
    }
    // The prompts' ids (BPE-encoded in Python) spell the prompts, spaces as 'Ġ' (U+0120).
    const GgufFile ref = GgufFile::open(fixtures / "gpt2_hf_reference.gguf");
    for (int p = 0; p < 2; ++p) {
        std::string spelled;
        for (int32_t id : test::values_of<int32_t>(ref.get_tensor(fmt::format("p{}.tokens", p)))) spelled += tokens[id];
        std::string text = ref.get_string(fmt::format("p{}.text", p));
        for (size_t at; (at = text.find(' ')) != std::string::npos;) text.replace(at, 1, "\xC4\xA0");
        CHECK(spelled == text);
    }
}

TEST_CASE("tokenizer.model (SentencePiece protobuf) embeds the llama vocabulary and generates the same text",
          "[convert][tokenizer][safetensors]") {
    test::TempDir dir;
    const auto folder = test::fixtures_dir() / "safetensors" / "stories260K_hf";
    const auto out = convert(dir, folder);
    const GgufFile f = GgufFile::open(out);
    const auto shared_model = test::shared_models_dir() / "stories260K.gguf";
    const GgufFile original = GgufFile::open(shared_model);
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
    CHECK(strings(f, "tokenizer.ggml.tokens") == strings(original, "tokenizer.ggml.tokens"));
    CHECK(ints(f, "tokenizer.ggml.token_type") == ints(original, "tokenizer.ggml.token_type"));
    CHECK(*f.find("tokenizer.ggml.scores") == *original.find("tokenizer.ggml.scores"));
    CHECK(f.get_int("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f.get_int("tokenizer.ggml.eos_token_id") == 2);
    CHECK(f.get_int("tokenizer.ggml.unknown_token_id") == 0);
    CHECK(f.find("tokenizer.ggml.padding_token_id") == nullptr);  // pad_id -1: none
    const std::string args = "-p 'Once upon a time' -n 60 --temp 0 -t 2";
    const auto converted = test::run_tool("kiln", fmt::format("-m {} {}", shell_quote(out.string()), args));
    const auto reference = test::run_tool("kiln", fmt::format("-m {} {}", shell_quote(shared_model.string()), args));
    INFO(converted.err);
    REQUIRE(converted.status == 0);
    CHECK(converted.out == reference.out);
    CHECK(converted.out.size() > 100);
}

TEST_CASE("broken vocabularies give one clear error", "[convert][tokenizer]") {
    Checkpoint c;
    CharVocabulary v;
    v.tokens = {"a", "b", "c"};
    v.control = {false, false, false};
    REQUIRE_ERROR(add_char_tokenizer(c, v, 4, "meta.pkl"), "the vocabulary has 3 tokens but the model's embedding has 4 rows");
    v.tokens[1] = "bb";
    REQUIRE_ERROR(add_char_tokenizer(c, v, 3, "meta.pkl"), "token 1 'bb' is not exactly one UTF-8 character");
    v.tokens[1] = "\xff";
    REQUIRE_ERROR(add_char_tokenizer(c, v, 3, "meta.pkl"), "is not exactly one UTF-8 character");
    v.tokens[1] = "a";
    REQUIRE_ERROR(add_char_tokenizer(c, v, 3, "meta.pkl"), "token 'a' appears twice");
    v.tokens[1] = "<s>";
    v.control[1] = true;  // a multi-character special token is fine
    v.bos = 7;
    REQUIRE_ERROR(add_char_tokenizer(c, v, 3, "meta.pkl"), "the bos token id 7 is outside the vocabulary");
    v.bos = 1;
    add_char_tokenizer(c, v, 3, "meta.pkl");
    CHECK(c.metadata.size() == 5);

    test::TempDir dir;
    const auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir.path() / name) << text;
        return dir.path() / name;
    };
    const nlohmann::json config = {{"eos_token_id", 2}};
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, write("wp.json", R"({"model": {"type": "WordPiece", "vocab": {}}})"), config, 3),
                  "kiln embeds byte-level BPE (GPT-2) tokenizers");
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, write("meta.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                                                               "pre_tokenizer": {"type": "Metaspace"}})"), config, 3),
                  "the pre-tokenizer [Metaspace] is not one kiln knows");
    const std::string too_many = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 5}, "merges": []},
                                    "pre_tokenizer": {"type": "ByteLevel"}})";
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, write("many.json", too_many), config, 3), "has id 5, beyond the model's 3 embedding rows");
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, write("cut.json", too_many.substr(0, 40)), config, 3), "not valid JSON");
    const std::string bad_eos = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]},
                                   "pre_tokenizer": {"type": "ByteLevel"}})";
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, write("eos.json", bad_eos), config, 2), "eos_token_id 2 is not a token id below 2");
    // Padded embedding rows become unused tokens.
    Checkpoint padded;
    add_hf_bpe_tokenizer(padded, write("ok.json", bad_eos), nlohmann::json::object(), 4);
    REQUIRE(padded.metadata[2].key == "tokenizer.ggml.tokens");
    CHECK(padded.metadata[2].value.as_array()->items.back() == GgufValue("<unused_3>"));

    const auto model = test::read_file(test::fixtures_dir() / "safetensors" / "stories260K_hf" / "tokenizer.model");
    for (size_t cut : {size_t{1}, size_t{3}, model.size() / 2, model.size() - 1}) {
        INFO("cut at " << cut);
        const std::string message = test::error_of([&] { parse_spm_model(std::span(model).first(cut), "tokenizer.model"); });
        CHECK((message.find("runs past the end") != std::string::npos || message.find("no pieces") != std::string::npos));
    }
    REQUIRE_ERROR(parse_spm_model(std::as_bytes(std::span("\x0b\x00", 2)), "x.model"), "wire type 3");
    CHECK(parse_spm_model(model, "tokenizer.model").pieces.size() == 512);
}

TEST_CASE("a meta.pkl is unpickled by the whitelist: code in it never runs", "[convert][tokenizer]") {
    test::TempDir dir;
    // pickle protocol 2: os.system("touch /tmp/kiln-meta-pwned"), written byte by byte.
    const std::string command = "touch /tmp/kiln-meta-pwned";
    const std::string hostile = std::string("\x80\x02" "cos\nsystem\n" "X", 14) +
                                std::string{static_cast<char>(command.size()), '\0', '\0', '\0'} + command + "\x85R.";
    const auto path = dir.path() / "meta.pkl";
    std::ofstream(path, std::ios::binary) << hostile;
    REQUIRE_ERROR(read_nanogpt_meta(path), "refers to os.system");
    CHECK_FALSE(std::filesystem::exists("/tmp/kiln-meta-pwned"));
    std::ofstream(path, std::ios::binary) << std::string("\x80\x02}q\x00.", 6);  // {} : no itos or stoi
    REQUIRE_ERROR(read_nanogpt_meta(path), "not a nanoGPT meta.pkl (no \"itos\" or \"stoi\")");
    const auto meta = test::read_file(test::fixtures_dir() / "gpt2" / "meta.pkl");
    test::write_file(path, std::span(meta).first(meta.size() / 2));
    CHECK_THROWS_AS(read_nanogpt_meta(path), Error);
    CHECK(read_nanogpt_meta(test::fixtures_dir() / "gpt2" / "meta.pkl").tokens.size() == 65);
}

TEST_CASE("corrupting any byte of tokenizer.model never crashes", "[convert][tokenizer]") {
    auto model = test::read_file(test::fixtures_dir() / "safetensors" / "stories260K_hf" / "tokenizer.model");
    size_t errors = 0, parsed = 0;
    for (size_t at = 0; at < model.size(); at += 7) {
        const std::byte saved = model[at];
        for (uint8_t value : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}}) {
            model[at] = std::byte{value};
            try {
                (void)parse_spm_model(model, "tokenizer.model");
                ++parsed;  // a changed score or character is still a valid model
            } catch (const Error&) {
                ++errors;
            }
        }
        model[at] = saved;
    }
    CHECK(errors > 0);
    CHECK(parsed > 0);
}

TEST_CASE("kiln-convert --tokenizer takes every kind of vocabulary file for every kind of checkpoint", "[convert][tokenizer]") {
    test::TempDir dir;
    const auto models = test::shared_models_dir();
    const auto bin = models / "stories260K.bin";
    const GgufFile original = GgufFile::open(models / "stories260K.gguf");
    const auto original_tokens = strings(original, "tokenizer.ggml.tokens");
    // stories260K's 512-token vocabulary in three files: llama2.c's export, the
    // SentencePiece model, and a GGUF to copy it from; each, told by content,
    // gives the llama2.c checkpoint llama.cpp's vocabulary.
    for (const auto& tokenizer : {models / "tok512.bin", test::fixtures_dir() / "safetensors" / "stories260K_hf" / "tokenizer.model",
                                  models / "stories260K.gguf"}) {
        INFO(tokenizer.string());
        const GgufFile f = GgufFile::open(convert(dir, bin, "--tokenizer " + shell_quote(tokenizer.string())));
        CHECK(f.get_string("tokenizer.ggml.model") == "llama");
        CHECK(strings(f, "tokenizer.ggml.tokens") == original_tokens);
        CHECK(f.get_int("tokenizer.ggml.bos_token_id") == 1);
        CHECK(f.get_int("tokenizer.ggml.eos_token_id") == 2);
    }
    // A GGUF written without a vocabulary takes one afterwards.
    const auto bare = dir.path() / "bare.gguf";
    REQUIRE(test::run_tool("kiln-convert", fmt::format("{} -o {} --no-tokenizer", shell_quote(bin.string()),
                                                       shell_quote(bare.string()))).status == 0);
    const GgufFile added = GgufFile::open(convert(dir, bare, "--tokenizer " + shell_quote((models / "tok512.bin").string())));
    CHECK(strings(added, "tokenizer.ggml.tokens") == original_tokens);

    // A llama2.c training checkpoint (model.py's state dict, 64 tokens) with a
    // llama2.c tokenizer.bin of its size, as llama2.c users have them.
    const auto tok64 = dir.path() / "tok64.bin";
    {
        std::ofstream out(tok64, std::ios::binary);
        const auto put = [&](const auto& v) { out.write(reinterpret_cast<const char*>(&v), sizeof(v)); };
        put(uint32_t{8});
        for (int i = 0; i < 64; ++i) {
            const std::string piece = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : fmt::format("t{}", i);
            put(static_cast<float>(-i));
            put(static_cast<int32_t>(piece.size()));
            out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        }
    }
    const GgufFile pt = GgufFile::open(convert(dir, test::fixtures_dir() / "torch" / "llama_f32.pt",
                                               "--tokenizer " + shell_quote(tok64.string())));
    CHECK(pt.get_string("general.architecture") == "llama");
    const auto pt_tokens = strings(pt, "tokenizer.ggml.tokens");
    REQUIRE(pt_tokens.size() == 64);
    CHECK(pt_tokens[5] == "t5");

    // Sizes that do not fit, and unknown files, are one line each, naming the file.
    for (const auto& [tokenizer, message] :
         {std::pair{models / "tok512.bin", std::string("the tokenizer holds more than the model's 64 tokens")},
          std::pair{models / "stories260K.gguf", std::string("the vocabulary has 512 tokens but the model's embedding has 64 rows")},
          std::pair{test::fixtures_dir() / "gpt2" / "meta.pkl", std::string("the vocabulary has 65 tokens")}}) {
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --tokenizer {}",
                                                                    shell_quote((test::fixtures_dir() / "torch" / "llama_f32.pt").string()),
                                                                    shell_quote((dir.path() / "refused.gguf").string()),
                                                                    shell_quote(tokenizer.string())));
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(message) != std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
        CHECK_FALSE(std::filesystem::exists(dir.path() / "refused.gguf"));
    }
    const auto both = test::run_tool("kiln-convert", fmt::format("{} -o {} --tokenizer {} --no-tokenizer", shell_quote(bin.string()),
                                                                 shell_quote((dir.path() / "refused.gguf").string()),
                                                                 shell_quote((models / "tok512.bin").string())));
    CHECK(both.status == 1);
    CHECK(both.err.find("contradict") != std::string::npos);
}

TEST_CASE("tokenizer.json pre-tokenizers map to llama.cpp's pre types, and tokenizer_config.json adds the chat template and specials",
          "[convert][tokenizer]") {
    test::TempDir dir;
    const auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir.path() / name) << text;
        return dir.path() / name;
    };
    // A vocabulary of four tokens and one merge; only the pre-tokenizer varies.
    const auto tokenizer_json = [&](const std::string& name, const nlohmann::json& pre) {
        nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}},
                            {"added_tokens", {{{"id", 3}, {"content", "<|im_end|>"}, {"special", true}}}},
                            {"pre_tokenizer", pre}};
        return write(name, j.dump());
    };
    const auto split = [](const std::string& regex) {
        return nlohmann::json{{"type", "Sequence"},
                              {"pretokenizers",
                               {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    };
    const std::string llama3 =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    const std::string qwen2 =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    const nlohmann::json smollm = {{"type", "Sequence"},
                                   {"pretokenizers",
                                    {{{"type", "Digits"}, {"individual_digits", true}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
    const auto pre_of = [&](const std::filesystem::path& file) {
        Checkpoint c;
        add_hf_bpe_tokenizer(c, file, nlohmann::json::object(), 4);
        for (const GgufEntry& e : c.metadata)
            if (e.key == "tokenizer.ggml.pre") return *e.value.as_string();
        return std::string("(none)");
    };
    CHECK(pre_of(tokenizer_json("gpt2.json", {{"type", "ByteLevel"}})) == "gpt-2");
    CHECK(pre_of(tokenizer_json("llama3.json", split(llama3))) == "llama-bpe");
    CHECK(pre_of(tokenizer_json("qwen2.json", split(qwen2))) == "qwen2");
    CHECK(pre_of(tokenizer_json("smollm.json", smollm)) == "smollm");
    Checkpoint c;
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, tokenizer_json("other.json", split(R"(\p{L}+|\s+)")), {}, 4),
                  R"(splits by the regex '\\p{L}+|\\s+', which is not one kiln knows)");
    REQUIRE_ERROR(add_hf_bpe_tokenizer(c, tokenizer_json("prefix.json", {{"type", "ByteLevel"}, {"add_prefix_space", true}}), {}, 4),
                  "adds a prefix space");

    // tokenizer_config.json: the template and the special tokens by text.
    Checkpoint q;
    add_hf_bpe_tokenizer(q, tokenizer_json("q.json", split(qwen2)), nlohmann::json::object(), 4);
    const std::string tmpl = "{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}";
    add_hf_tokenizer_config(q, write("tokenizer_config.json",
                                     nlohmann::json{{"chat_template", tmpl},
                                                    {"eos_token", "<|im_end|>"},
                                                    {"pad_token", {{"content", "ab"}, {"lstrip", false}}},
                                                    {"add_bos_token", false},
                                                    {"bos_token", nullptr}}
                                         .dump()));
    std::map<std::string, const GgufValue*> keys;
    for (const GgufEntry& e : q.metadata) keys[e.key] = &e.value;
    REQUIRE(keys.count("tokenizer.chat_template") == 1);
    CHECK(*keys["tokenizer.chat_template"]->as_string() == tmpl);
    CHECK(keys["tokenizer.ggml.eos_token_id"]->as_int() == 3);
    CHECK(keys["tokenizer.ggml.padding_token_id"]->as_int() == 2);
    CHECK(keys["tokenizer.ggml.add_bos_token"]->as_bool() == false);
    CHECK(keys.count("tokenizer.ggml.bos_token_id") == 0);
    // Named templates: "default" is the chat template, the others keep their names.
    add_hf_tokenizer_config(q, write("named.json", R"({"chat_template": [{"name": "default", "template": "D"},
                                                                          {"name": "tool_use", "template": "T"}]})"));
    keys.clear();
    for (const GgufEntry& e : q.metadata) keys[e.key] = &e.value;
    CHECK(*keys["tokenizer.chat_template"]->as_string() == "D");
    CHECK(*keys["tokenizer.chat_template.tool_use"]->as_string() == "T");
    REQUIRE_ERROR(add_hf_tokenizer_config(q, write("bad.json", R"({"eos_token": "</s>"})")), "eos_token '</s>' is not in the vocabulary");
}
