// kiln-convert --to safetensors: the vocabulary goes with the folder
// (tokenizer.model for SentencePiece, tokenizer.json for byte-level BPE,
// tokenizer_config.json and the special ids for both) and gpt2 models become
// GPT2LMHeadModel folders; GGUF -> HF -> GGUF keeps the tokenizer.* keys and
// the tensors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/checkpoint/safetensors.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

test::ToolRun convert_ok(const std::string& args) {
    test::ToolRun run = test::run_tool("kiln-convert", args);
    INFO(args << "\n" << run.err);
    REQUIRE(run.status == 0);
    return run;
}

// kiln-convert IN -o FOLDER --to safetensors; the log.
std::string export_folder(const std::filesystem::path& in, const std::filesystem::path& folder) {
    std::filesystem::create_directories(folder.parent_path());
    return convert_ok(fmt::format("{} -o {} --to safetensors", shell_quote(in.string()), shell_quote(folder.string()))).err;
}

std::filesystem::path to_gguf(const std::filesystem::path& in, const std::filesystem::path& out) {
    convert_ok(fmt::format("{} -o {}", shell_quote(in.string()), shell_quote(out.string())));
    return out;
}

std::map<std::string, GgufValue> tokenizer_keys(const GgufFile& f) {
    std::map<std::string, GgufValue> out;
    for (const GgufEntry& e : f.metadata())
        if (e.key.starts_with("tokenizer.")) out[e.key] = e.value;
    return out;
}

void check_same_tensors(const GgufFile& a, const GgufFile& b) {
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (const GgufTensor& t : a.tensors()) {
        INFO(t.name);
        const GgufTensor& u = b.get_tensor(t.name);
        CHECK(u.type == t.type);
        CHECK(u.dims == t.dims);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
}

// `from` rewritten with its metadata changed by `edit` (tensors unchanged).
template <typename Edit>
std::filesystem::path rewrite(const std::filesystem::path& from, const std::filesystem::path& to, Edit edit) {
    const GgufFile f = GgufFile::open(from);
    std::vector<GgufEntry> md(f.metadata().begin(), f.metadata().end());
    edit(md);
    GgufWriter w;
    for (GgufEntry& e : md) w.set(e.key, e.value);
    for (const GgufTensor& t : f.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
    w.write(to);
    return to;
}

void set_key(std::vector<GgufEntry>& md, const std::string& key, GgufValue value) {
    for (GgufEntry& e : md)
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    md.push_back({key, std::move(value)});
}

nlohmann::json read_json(const std::filesystem::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("export: a SentencePiece vocabulary becomes tokenizer.model and comes back with the same keys",
          "[convert][safetensors][tokenizer]") {
    test::TempDir dir;
    const auto original_path = test::shared_models_dir() / "stories260K.gguf";
    const auto folder = dir.path() / "a" / "stories260K";
    const std::string log = export_folder(original_path, folder);
    CHECK(log.find("tokenizer.model, tokenizer_config.json, generation_config.json") != std::string::npos);
    const GgufFile original = GgufFile::open(original_path);

    // tokenizer.model parses (kiln's own protobuf reader) into the GGUF's pieces, scores and types.
    const auto proto = test::read_file(folder / "tokenizer.model");
    const SpmModel m = parse_spm_model(proto, "tokenizer.model");
    const auto tokens = tokenizer_keys(original);
    REQUIRE(m.pieces.size() == 512);
    for (size_t i = 0; i < m.pieces.size(); ++i) {
        CHECK(m.pieces[i] == *tokens.at("tokenizer.ggml.tokens").as_array()->items[i].as_string());
        CHECK(m.scores[i] == *tokens.at("tokenizer.ggml.scores").as_array()->items[i].as_number());
        CHECK(m.types[i] == *tokens.at("tokenizer.ggml.token_type").as_array()->items[i].as_int());
    }
    CHECK(m.unk_id == 0);
    CHECK(m.bos_id == 1);
    CHECK(m.eos_id == 2);
    CHECK(m.pad_id == -1);  // 4294967295: none
    CHECK(m.add_dummy_prefix);
    // The pieces are encoded as the independent fixture (make_safetensors_fixtures.py's hand encoding) has them.
    const auto fixture = test::read_file(test::fixtures_dir() / "safetensors" / "stories260K_hf" / "tokenizer.model");
    size_t pieces_end = 0;
    while (pieces_end < fixture.size() && fixture[pieces_end] == std::byte{0x0a}) {
        size_t length = 0, shift = 0;
        uint8_t b = 0;
        do {
            b = static_cast<uint8_t>(fixture[++pieces_end]);
            length |= size_t(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        pieces_end += 1 + length;
    }
    REQUIRE(pieces_end > 7000);
    REQUIRE(proto.size() > pieces_end);
    CHECK(std::equal(proto.begin(), proto.begin() + static_cast<std::ptrdiff_t>(pieces_end), fixture.begin()));
    // TrainerSpec's bos_piece (field 46) is "<s>", as SentencePiece reads it (kiln's reader takes the ids only).
    const std::vector<std::byte> bos_piece = {std::byte{0xf2}, std::byte{0x02}, std::byte{3}, std::byte{'<'},
                                              std::byte{'s'}, std::byte{'>'}};
    CHECK(std::search(proto.begin(), proto.end(), bos_piece.begin(), bos_piece.end()) != proto.end());
    const auto tc = read_json(folder / "tokenizer_config.json");
    CHECK(tc["bos_token"] == "<s>");
    CHECK(tc["eos_token"] == "</s>");
    CHECK(tc["unk_token"] == "<unk>");
    CHECK(tc["add_bos_token"] == true);
    CHECK(tc["add_eos_token"] == false);
    CHECK(read_json(folder / "config.json")["bos_token_id"] == 1);
    CHECK(read_json(folder / "generation_config.json")["eos_token_id"] == 2);

    // Back to GGUF with no --tokenizer: the folder carries the vocabulary.
    const auto back_path = to_gguf(folder, dir.path() / "back.gguf");
    const GgufFile back = GgufFile::open(back_path);
    check_same_tensors(original, back);
    const auto got = tokenizer_keys(back);
    // Equal in both files:
    for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                            "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id",
                            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
        INFO(key);
        REQUIRE(got.count(key) == 1);
        CHECK(got.at(key) == tokens.at(key));
    }
    // Only in the original, meaning none: seperator and padding 4294967295.
    for (const char* key : {"tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id"}) {
        INFO(key);
        CHECK(tokens.at(key).as_int() == 4294967295);
        CHECK(got.count(key) == 0);
    }
    // Only in the round trip: llama.cpp's SentencePiece defaults, now explicit.
    CHECK(got.at("tokenizer.ggml.add_bos_token") == GgufValue(true));
    CHECK(got.at("tokenizer.ggml.add_eos_token") == GgufValue(false));
    CHECK(got.at("tokenizer.ggml.add_space_prefix") == GgufValue(true));
    CHECK(got.size() == 10);
    CHECK(tokens.size() == 9);

    // From there on the trip is exact: GGUF -> HF -> GGUF gives the same file, byte for byte.
    const auto folder2 = dir.path() / "b" / "stories260K";  // the same general.name
    export_folder(back_path, folder2);
    CHECK(test::read_file(folder2 / "tokenizer.model") == proto);
    CHECK(test::read_file(to_gguf(folder2, dir.path() / "back2.gguf")) == test::read_file(back_path));

    // Every key set: chat templates (plain and named), add_bos/add_eos/add_space_prefix, a padding id.
    const auto edited = rewrite(original_path, dir.path() / "edited.gguf", [](std::vector<GgufEntry>& md) {
        set_key(md, "tokenizer.chat_template", GgufValue("{% for m in messages %}{{ m['content'] }}</s>{% endfor %}"));
        set_key(md, "tokenizer.chat_template.tool_use", GgufValue("T"));
        set_key(md, "tokenizer.ggml.add_bos_token", GgufValue(false));
        set_key(md, "tokenizer.ggml.add_eos_token", GgufValue(true));
        set_key(md, "tokenizer.ggml.add_space_prefix", GgufValue(false));
        set_key(md, "tokenizer.ggml.padding_token_id", GgufValue(uint32_t{3}));
        std::erase_if(md, [](const GgufEntry& e) { return e.key == "tokenizer.ggml.seperator_token_id"; });
    });
    const auto folder3 = dir.path() / "c" / "edited";
    export_folder(edited, folder3);
    const auto tc3 = read_json(folder3 / "tokenizer_config.json");
    CHECK(tc3["chat_template"].is_array());
    CHECK(tc3["pad_token"] == "<0x00>");
    CHECK(read_json(folder3 / "config.json")["pad_token_id"] == 3);
    const GgufFile e = GgufFile::open(edited), e_back = GgufFile::open(to_gguf(folder3, dir.path() / "edited_back.gguf"));
    CHECK(tokenizer_keys(e) == tokenizer_keys(e_back));
    check_same_tensors(e, e_back);
}

TEST_CASE("export: byte-level BPE vocabularies become tokenizer.json for each pre type kiln maps",
          "[convert][safetensors][tokenizer]") {
    test::TempDir dir;
    const auto base = to_gguf(test::fixtures_dir() / "gpt2" / "gpt2_hf", dir.path() / "gpt2_hf.gguf");
    const std::string pre = GENERATE("gpt-2", "llama-bpe", "qwen2", "smollm");
    INFO(pre);
    const auto gguf = rewrite(base, dir.path() / "pre.gguf", [&](std::vector<GgufEntry>& md) {
        set_key(md, "tokenizer.ggml.pre", GgufValue(pre));
        set_key(md, "tokenizer.chat_template", GgufValue("{{ messages[0]['content'] }}"));
        set_key(md, "tokenizer.chat_template.rag", GgufValue("R"));
        set_key(md, "tokenizer.ggml.add_bos_token", GgufValue(pre == "llama-bpe"));
        set_key(md, "tokenizer.ggml.add_eos_token", GgufValue(pre == "qwen2"));
        set_key(md, "tokenizer.ggml.padding_token_id", GgufValue(uint32_t{0}));
        set_key(md, "tokenizer.ggml.unknown_token_id", GgufValue(uint32_t{1}));
    });
    const auto folder = dir.path() / "hf" / "pre";
    const std::string log = export_folder(gguf, folder);
    CHECK(log.find("tokenizer.json, tokenizer_config.json, generation_config.json") != std::string::npos);
    const auto tj = read_json(folder / "tokenizer.json");
    CHECK(tj["model"]["type"] == "BPE");
    CHECK(tj["model"]["vocab"].size() == 296);  // <|endoftext|> is an added (special) token
    CHECK(tj["added_tokens"].size() == 1);
    CHECK(tj["added_tokens"][0]["special"] == true);
    CHECK(tj["decoder"]["type"] == "ByteLevel");
    CHECK(tj["post_processor"]["type"] == (pre == "llama-bpe" || pre == "qwen2" ? "Sequence" : "ByteLevel"));
    const GgufFile a = GgufFile::open(gguf), b = GgufFile::open(to_gguf(folder, dir.path() / "back.gguf"));
    // Every tokenizer.* key (model, pre, tokens, token_type, merges, bos/eos/unknown/padding ids,
    // add_bos/add_eos, chat templates) with its value.
    const auto want = tokenizer_keys(a), got = tokenizer_keys(b);
    CHECK(want.size() == 13);
    for (const auto& [key, value] : want) {
        INFO(key);
        REQUIRE(got.count(key) == 1);
        CHECK(got.at(key) == value);
    }
    CHECK(got.size() == want.size());
    check_same_tensors(a, b);
}

TEST_CASE("export: vocabularies Hugging Face files cannot hold are refused or left out, by name",
          "[convert][safetensors][tokenizer]") {
    test::TempDir dir;
    const auto base = to_gguf(test::fixtures_dir() / "gpt2" / "gpt2_hf", dir.path() / "gpt2_hf.gguf");
    const auto refused = [&](const std::filesystem::path& gguf, const std::string& message) {
        const auto folder = dir.path() / "refused";
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --to safetensors", shell_quote(gguf.string()),
                                                                     shell_quote(folder.string())));
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(message) != std::string::npos);
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(folder));
    };
    refused(rewrite(base, dir.path() / "deepseek.gguf",
                    [](auto& md) { set_key(md, "tokenizer.ggml.pre", GgufValue("deepseek-llm")); }),
            "tokenizer.ggml.pre 'deepseek-llm' has no Hugging Face pre_tokenizer kiln writes (gpt-2, llama-bpe, qwen2, smollm)");
    refused(rewrite(base, dir.path() / "default.gguf",
                    [](auto& md) { std::erase_if(md, [](const GgufEntry& e) { return e.key == "tokenizer.ggml.pre"; }); }),
            "it has no tokenizer.ggml.pre (llama.cpp's 'default' pre-tokenizer)");

    // A character vocabulary (nanoGPT's meta.pkl): the weights, no tokenizer files, a note.
    const auto folder = dir.path() / "char";
    const auto run = convert_ok(fmt::format("{} --tokenizer {} -o {} --to safetensors",
                                            shell_quote((test::fixtures_dir() / "gpt2" / "nanogpt_bias.pt").string()),
                                            shell_quote((test::fixtures_dir() / "gpt2" / "meta.pkl").string()),
                                            shell_quote(folder.string())));
    CHECK(run.err.find("note: the character vocabulary (tokenizer.ggml.model 'char') has no Hugging Face tokenizer "
                       "file kiln writes: none written") != std::string::npos);
    CHECK(std::filesystem::exists(folder / "model.safetensors"));
    for (const char* file : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "generation_config.json"})
        CHECK_FALSE(std::filesystem::exists(folder / file));
}

TEST_CASE("export: gpt2 models become GPT2LMHeadModel folders, tied and untied, losslessly",
          "[convert][safetensors][gpt2]") {
    const std::string name = GENERATE("gpt2_hf", "gpt2_hf_untied");
    INFO(name);
    test::TempDir dir;
    const auto fixture = test::fixtures_dir() / "gpt2" / name;
    const auto first = to_gguf(fixture, dir.path() / "first.gguf");
    const auto folder = dir.path() / "exported" / name;  // the same folder name: the same general.name
    export_folder(first, folder);
    const auto second = to_gguf(folder, dir.path() / "second.gguf");
    // The whole file, metadata (vocabulary included) and tensors, byte for byte.
    CHECK(test::read_file(first) == test::read_file(second));
    check_same_tensors(GgufFile::open(first), GgufFile::open(second));

    // The exported folder holds the fixture's tensors (Conv1D (in, out) matrices), less HF's old attention-mask buffers.
    const SafetensorsFile given = SafetensorsFile::open(fixture / "model.safetensors");
    const SafetensorsFile exported = SafetensorsFile::open(folder / "model.safetensors");
    size_t compared = 0;
    for (const SafetensorsTensor& t : given.tensors()) {
        if (t.name.ends_with(".attn.bias") || t.name.ends_with(".attn.masked_bias")) continue;
        INFO(t.name);
        const SafetensorsTensor* e = exported.find_tensor(t.name);
        REQUIRE(e != nullptr);
        CHECK(e->type == t.type);
        CHECK(e->shape == t.shape);
        CHECK(std::equal(e->data.begin(), e->data.end(), t.data.begin(), t.data.end()));
        ++compared;
    }
    CHECK(exported.tensors().size() == compared);
    CHECK((exported.find_tensor("lm_head.weight") != nullptr) == (name == "gpt2_hf_untied"));
    const auto config = read_json(folder / "config.json"), want = read_json(fixture / "config.json");
    for (const char* key : {"architectures", "model_type", "n_embd", "n_layer", "n_head", "n_positions", "n_ctx",
                            "n_inner", "layer_norm_epsilon", "vocab_size", "tie_word_embeddings", "bos_token_id",
                            "eos_token_id", "activation_function"}) {
        INFO(key);
        CHECK(config[key] == want[key]);
    }
}

TEST_CASE("export: a gpt2 model without biases gets zero biases and n_inner", "[convert][safetensors][gpt2]") {
    test::TempDir dir;
    const auto gguf = test::fixtures_dir() / "gpt2" / "tiny_nobias.gguf";
    const auto folder = dir.path() / "nobias";
    const std::string log = export_folder(gguf, folder);
    CHECK(log.find("note: 13 biases the model lacks are written as zeros") != std::string::npos);
    CHECK(log.find("note: the model has no vocabulary: no tokenizer files written") != std::string::npos);
    const auto config = read_json(folder / "config.json");
    CHECK(config["n_inner"] == 76);
    CHECK(config["bos_token_id"].is_null());
    const auto back_path = dir.path() / "back.gguf";
    convert_ok(fmt::format("{} -o {} --no-tokenizer", shell_quote(folder.string()), shell_quote(back_path.string())));
    const GgufFile a = GgufFile::open(gguf), b = GgufFile::open(back_path);
    size_t zeros = 0;
    for (const GgufTensor& t : b.tensors()) {
        INFO(t.name);
        bool found = false;
        for (const GgufTensor& u : a.tensors()) {
            if (u.name != t.name) continue;
            found = true;
            CHECK(u.dims == t.dims);
            CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
        }
        if (!found) {
            CHECK(t.name.ends_with(".bias"));
            CHECK(std::all_of(t.data.begin(), t.data.end(), [](std::byte x) { return x == std::byte{0}; }));
            ++zeros;
        }
    }
    CHECK(zeros == 13);  // 2 layers of 6, and ln_f
}

TEST_CASE("export: --help says what --to safetensors writes", "[convert][safetensors]") {
    const test::ToolRun run = test::run_tool("kiln-convert", "--help");
    CHECK(run.status == 0);
    const std::string help = run.out.substr(run.out.find("--to safetensors      "));
    for (const char* text : {"gpt2 -> GPT2LMHeadModel", "tokenizer.model (SentencePiece)", "tokenizer.json (byte-level BPE",
                             "tokenizer_config.json", "generation_config.json", "a char vocabulary is left out"})
        CHECK(help.find(text) != std::string::npos);
}

TEST_CASE("export: a llama model with a byte-level BPE vocabulary (Llama 3's kind) comes back through tokenizer.json",
          "[convert][safetensors][tokenizer]") {
    test::TempDir dir;
    // stories260K's weights with a made-up 512-row gpt2 vocabulary: normal tokens, a control and a
    // user-defined token, and unused padding rows at the end, which tokenizer.json leaves out.
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int i = 0; i < 500; ++i) {
        tokens.push_back(fmt::format("t{}", i));
        types.push_back(1);
    }
    // What the merges below make, so the vocabulary is one kiln loads (kiln-convert checks).
    tokens[498] = "t1t2";
    tokens[499] = "t12t3";
    tokens.push_back("<|begin_of_text|>");
    types.push_back(3);
    tokens.push_back("<|user|>");
    types.push_back(4);
    for (size_t i = tokens.size(); i < 512; ++i) {
        tokens.push_back(fmt::format("<unused_{}>", i));
        types.push_back(5);
    }
    const auto gguf = rewrite(test::shared_models_dir() / "stories260K.gguf", dir.path() / "bpe.gguf", [&](auto& md) {
        std::erase_if(md, [](const GgufEntry& e) { return e.key.starts_with("tokenizer."); });
        md.push_back({"tokenizer.ggml.model", GgufValue("gpt2")});
        md.push_back({"tokenizer.ggml.pre", GgufValue("llama-bpe")});
        md.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)});
        md.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
        md.push_back({"tokenizer.ggml.merges", gguf_array(GgufType::STRING, std::vector<std::string>{"t1 t2", "t12 t3"})});
        md.push_back({"tokenizer.ggml.bos_token_id", GgufValue(uint32_t{500})});
        md.push_back({"tokenizer.ggml.eos_token_id", GgufValue(uint32_t{501})});
        md.push_back({"tokenizer.ggml.add_bos_token", GgufValue(true)});
        md.push_back({"tokenizer.chat_template", GgufValue("{{ bos_token }}")});
    });
    const auto folder = dir.path() / "hf" / "bpe";
    export_folder(gguf, folder);
    CHECK_FALSE(std::filesystem::exists(folder / "tokenizer.model"));
    const auto tj = read_json(folder / "tokenizer.json");
    CHECK(tj["model"]["vocab"].size() == 500);
    CHECK(tj["model"]["ignore_merges"] == true);
    CHECK(tj["added_tokens"].size() == 2);
    CHECK(tj["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] == "<|begin_of_text|>");
    CHECK(read_json(folder / "config.json")["architectures"][0] == "LlamaForCausalLM");
    CHECK(read_json(folder / "config.json")["bos_token_id"] == 500);
    const GgufFile a = GgufFile::open(gguf), b = GgufFile::open(to_gguf(folder, dir.path() / "back.gguf"));
    CHECK(tokenizer_keys(a) == tokenizer_keys(b));
    CHECK(tokenizer_keys(b).size() == 9);
    check_same_tensors(a, b);
}
