// Hostile and broken inputs (issue 19): each case is a file an attacker or a
// careless user could hand kiln. Every one must end in one clear error line
// (or a correct result), a non-zero exit for the programs, no file left
// behind, and, for the inputs that used to amplify, a peak resident memory
// within 64 MiB + 4x the input's size. The PyTorch inputs are written by
// torch.save itself (tests/reference/make_hostile_fixtures.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "formats/arch/llama_arch.h"
#include "formats/arch/metadata_view.h"
#include "formats/checkpoint/allocation_budget.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "formats/checkpoint/json_limits.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/child_process.h"
#include "support/error_check.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::filesystem::path hostile(std::string_view name) { return test::fixtures_dir() / "hostile" / name; }
std::filesystem::path stories_hf() { return test::fixtures_dir() / "safetensors" / "stories260K_hf"; }

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A copy of stories260K's Hugging Face folder in `dir`, with `edit` applied to config.json.
std::filesystem::path hf_copy(const test::TempDir& dir, const std::function<void(nlohmann::json&)>& edit = nullptr,
                              bool with_spm = true) {
    const std::filesystem::path folder = dir.path() / "model";
    std::filesystem::create_directory(folder);
    std::filesystem::copy_file(stories_hf() / "model.safetensors", folder / "model.safetensors");
    if (with_spm) std::filesystem::copy_file(stories_hf() / "tokenizer.model", folder / "tokenizer.model");
    nlohmann::json config = nlohmann::json::parse(read_text(stories_hf() / "config.json"));
    if (edit) edit(config);
    write_text(folder / "config.json", config.dump());
    return folder;
}

// The limit every failing conversion's whole process must stay within.
long rss_limit_kib(uintmax_t input_bytes) { return static_cast<long>((64u << 20) + 4 * input_bytes) / 1024; }

// Checks a run's peak RSS against the limit. Under ASan the RSS also counts the
// shadow memory and the freed-memory quarantine (160 MB for a run that needs
// 20 MB in Release), and under qemu-user the emulator's own memory and
// translated code (30 MB more measured), so there the budget is left to the
// native Release suite.
void check_within_memory_limit(const test::ToolRun& run, uintmax_t input_bytes) {
    INFO("peak RSS " << run.peak_rss_kib << " KiB, limit " << rss_limit_kib(input_bytes) << " KiB");
    if (!test::under_sanitizer() && !test::under_emulator()) CHECK(run.peak_rss_kib <= rss_limit_kib(input_bytes));
}

// Runs kiln-convert on `input`; it must fail with one line containing
// `fragment`, leave no output, and stay within the memory limit for `input_bytes`.
void expect_convert_refuses(const std::string& input, const std::string& fragment, uintmax_t input_bytes,
                            const std::string& extra = "--no-tokenizer") {
    test::TempDir out;
    const std::filesystem::path gguf = out.path() / "out.gguf";
    const test::ToolRun run =
        test::run_tool_measured("kiln-convert", shell_quote(input) + " -o " + shell_quote(gguf.string()) + " " + extra);
    INFO(run.err);
    CHECK(run.status == 1);
    CHECK(run.err.find(fragment) != std::string::npos);
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
    CHECK(std::filesystem::is_empty(out.path()));  // neither the file nor a temporary one
    check_within_memory_limit(run, input_bytes);
}

// `n` nested one-element arrays.
std::string nested_arrays(size_t n) { return std::string(n, '[') + std::string(n, ']'); }

}  // namespace

TEST_CASE("a tokenizer.json id of 2^64 - 1 is refused id by id, never wrapped into the table", "[hostile][tokenizer]") {
    test::TempDir dir;
    const nlohmann::json config = nlohmann::json::object();
    for (const char* text :
         {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 18446744073709551615}, "merges": []},
              "pre_tokenizer": {"type": "ByteLevel"}})",
          R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"},
              "added_tokens": [{"id": 18446744073709551615, "content": "<x>", "special": true}]})"}) {
        write_text(dir.path() / "tokenizer.json", text);
        Checkpoint c;
        REQUIRE_ERROR(add_hf_bpe_tokenizer(c, dir.path() / "tokenizer.json", config, 4),
                      "has id 18446744073709551615, beyond the model's 4 embedding rows");
    }
    // The whole program: used to die with "double free or corruption" (SIGABRT) or SIGSEGV.
    const std::filesystem::path folder = hf_copy(dir, nullptr, false);
    write_text(folder / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 18446744073709551615},
                                             "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})");
    expect_convert_refuses(folder.string(), "token 'b' has id 18446744073709551615, beyond the model's 512 embedding rows",
                           std::filesystem::file_size(folder / "model.safetensors"), "");
}

TEST_CASE("deeply nested JSON is refused before anything copies or prints it", "[hostile][json]") {
    CHECK(json_nesting_depth(R"({"a": [1, {"b": "[[[[" }]})") == 3);
    CHECK(json_nesting_depth(R"(["\"[[[", ["\\"], [[]]])") == 3);
    CHECK(json_nesting_depth(nested_arrays(1000000)) == kMaxJsonDepth + 1);  // stops counting past the limit
    REQUIRE_ERROR(parse_json_bounded(nested_arrays(kMaxJsonDepth + 1), "hf", "x.json"),
                  "x.json: the JSON nests arrays or objects more than 128 levels deep");
    CHECK(parse_json_bounded(nested_arrays(kMaxJsonDepth), "hf", "x.json").is_array());

    test::TempDir dir;
    const std::filesystem::path folder = hf_copy(dir, nullptr, false);
    const auto weights = std::filesystem::file_size(folder / "model.safetensors");
    // model.type: a million brackets that dump() used to recurse through (SIGSEGV, nothing on stderr).
    write_text(folder / "tokenizer.json", R"({"model": {"type": )" + nested_arrays(1000000) + "}}");
    expect_convert_refuses(folder.string(), "tokenizer.json: the JSON nests arrays or objects more than 128 levels deep",
                           weights + 2000000, "");
    // 200k nested Sequence pre-tokenizers.
    std::string sequences;
    for (int i = 0; i < 200000; ++i) sequences += R"({"type": "Sequence", "pretokenizers": [)";
    for (int i = 0; i < 200000; ++i) sequences += "]}";
    write_text(folder / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": )" +
                                              sequences + "}");
    expect_convert_refuses(folder.string(), "more than 128 levels deep", weights + sequences.size(), "");
    // config.json itself.
    std::filesystem::remove(folder / "tokenizer.json");
    write_text(folder / "config.json", R"({"architectures": ["LlamaForCausalLM"], "x": )" + nested_arrays(1000000) + "}");
    expect_convert_refuses(folder.string(), "config.json: the JSON nests arrays or objects more than 128 levels deep",
                           weights + 2000000);
}

TEST_CASE("values from a file are shown cut short in error messages", "[hostile][json]") {
    CHECK(json_excerpt(nlohmann::json(std::string(1000000, 'x'))).size() <= 84);
    CHECK(json_excerpt(nlohmann::json::parse(R"([1, "a\nb", {"k": null}])")) == R"([1, "a\nb", {"k": null}])");
    const std::string long_list = nlohmann::json(std::vector<int>(100000, 7)).dump();
    const std::string cut = json_excerpt(nlohmann::json::parse(long_list));
    CHECK(cut.size() == 83);
    CHECK(cut.starts_with("[7, 7, 7"));
    CHECK(cut.ends_with("..."));
    CHECK(json_excerpt(nlohmann::json("\xc3\xa9" + std::string(100, 'e')), 2) == "\"...");  // never half a character

    test::TempDir dir;
    write_text(dir.path() / "tokenizer.json", R"({"model": {"type": ")" + std::string(1000000, 'W') + R"("}})");
    Checkpoint c;
    const std::string message = test::error_of(
        [&] { add_hf_bpe_tokenizer(c, dir.path() / "tokenizer.json", nlohmann::json::object(), 4); });
    CHECK(message.find("the tokenizer model is \"WWWW") != std::string::npos);
    CHECK(message.size() < 400);
}

TEST_CASE("a .pt whose memoised values are referenced thousands of times stays within its memory budget",
          "[hostile][pytorch]") {
    // Before: shared_bytes.pt (105 KB) passed 3 GB, shared_list.pt (92 KB) reached 1.5 GB in 24 s.
    for (const char* name : {"shared_bytes.pt", "shared_list.pt"}) {
        INFO(name);
        const std::filesystem::path input = hostile(name);
        expect_convert_refuses(input.string(), "would take more than 32 MiB of memory, more than a file of",
                               std::filesystem::file_size(input));
    }
    AllocationBudget budget(1000, "pytorch", "f.pt");
    CHECK(budget.limit() == (32u << 20) + 2000);
    budget.charge(budget.limit(), "values");
    REQUIRE_ERROR(budget.charge(1, "the pickle's lists"), "f.pt: building the pickle's lists would take more than 32 MiB");
}

TEST_CASE("layer counts the tensors cannot back are refused before they drive loops", "[hostile][pytorch][hf]") {
    // Before: llama_layers.pt and llama_index.pt ran past 30 s and 2 GB; nanogpt_nobias.pt spun for minutes.
    const std::pair<const char*, const char*> cases[] = {
        {"llama_layers.pt", "model_args.n_layers is 4294967295 but the tensors hold 1 layer ('model.layers.N.*')"},
        {"llama_index.pt", "tensor 'model.layers.4000000000.attention_norm.weight' is not part of a llama2.c model "
                           "with 2 layers"},
        {"nanogpt_nobias.pt", "model_args.n_layer is 4294967295 but the tensors hold 1 layer ('h.N.*')"},
    };
    for (const auto& [name, fragment] : cases) {
        INFO(name);
        expect_convert_refuses(hostile(name).string(), fragment, std::filesystem::file_size(hostile(name)));
    }
    test::TempDir dir;
    const std::filesystem::path folder = hf_copy(dir, [](nlohmann::json& c) { c["num_hidden_layers"] = 4294967295u; });
    expect_convert_refuses(folder.string(),
                           "config.json's num_hidden_layers is 4294967295 but the tensors hold 5 layers ('model.layers.N.*')",
                           std::filesystem::file_size(folder / "model.safetensors"));
}

namespace {

// stories260K converted from its Hugging Face folder into `dir`, then
// rewritten with `edit` applied to its metadata (and optionally its tensors).
std::filesystem::path edited_gguf(const test::TempDir& dir, const std::function<void(std::vector<GgufEntry>&)>& edit) {
    const std::filesystem::path base = dir.path() / "base.gguf";
    if (!std::filesystem::exists(base)) {
        const test::ToolRun run = test::run_tool(
            "kiln-convert", shell_quote(stories_hf().string()) + " -o " + shell_quote(base.string()));
        REQUIRE(run.status == 0);
    }
    const GgufFile file = GgufFile::open(base);
    std::vector<GgufEntry> metadata = file.metadata();
    edit(metadata);
    GgufWriter w;
    for (const GgufEntry& e : metadata) w.set(e.key, e.value);
    for (const GgufTensor& t : file.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
    const std::filesystem::path out = dir.path() / "edited.gguf";
    w.write(out);
    return out;
}

void set(std::vector<GgufEntry>& md, const std::string& key, GgufValue value) {
    for (GgufEntry& e : md)
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    md.push_back({key, std::move(value)});
}

}  // namespace

TEST_CASE("a GGUF block_count beyond its tensors is refused before per-layer tables are built", "[hostile][gguf]") {
    test::TempDir dir;
    const auto path = edited_gguf(dir, [](auto& md) { set(md, "llama.block_count", GgufValue(uint32_t{1} << 24)); });
    const test::ToolRun run = test::run_tool_measured("kiln", "-m " + shell_quote(path.string()) + " -p Once -n 4");
    INFO(run.err);
    CHECK(run.status == 1);
    CHECK(run.err.find("llama.block_count is 16777216 but the file holds only 48 tensors") != std::string::npos);
    check_within_memory_limit(run, std::filesystem::file_size(path));
}

TEST_CASE("NaN or non-positive rms_epsilon and rope.freq_base are refused", "[hostile][gguf]") {
    test::TempDir dir;
    const std::pair<const char*, float> cases[] = {
        {"llama.attention.layer_norm_rms_epsilon", std::numeric_limits<float>::quiet_NaN()},
        {"llama.attention.layer_norm_rms_epsilon", -1e-5f},
        {"llama.rope.freq_base", std::numeric_limits<float>::quiet_NaN()},
        {"llama.rope.freq_base", 0.0f},
        {"llama.rope.freq_base", std::numeric_limits<float>::infinity()},
    };
    for (const auto& [key, value] : cases) {
        INFO(key << " = " << value);
        const auto path = edited_gguf(dir, [&](auto& md) { set(md, key, GgufValue(value)); });
        const GgufFile file = GgufFile::open(path);
        REQUIRE_ERROR(arch::LlamaParams::read(file), std::string(key) + " is ");
        REQUIRE_ERROR(arch::LlamaParams::read(file), "(it must be a positive finite number)");
    }
}

TEST_CASE("a vocabulary smaller than the embedding is refused when kiln and kiln-perplexity load it", "[hostile][gguf]") {
    test::TempDir dir;
    const auto path = edited_gguf(dir, [](std::vector<GgufEntry>& md) {
        for (GgufEntry& e : md)
            if (const GgufArray* a = e.value.as_array(); a && a->items.size() == 512 && e.key.starts_with("tokenizer.")) {
                GgufArray cut = *a;
                cut.items.resize(500);
                e.value = GgufValue(std::move(cut));
            }
    });
    write_text(dir.path() / "text.txt", std::string(4000, 'a'));
    const std::string expected = "the vocabulary has 500 tokens but the model's embedding has 512 rows";
    const test::ToolRun kiln = test::run_tool("kiln", "-m " + shell_quote(path.string()) + " -p Once -n 4");
    CHECK(kiln.status == 1);
    CHECK(kiln.err.find(expected) != std::string::npos);
    CHECK(kiln.out.empty());  // nothing generated before the refusal
    const test::ToolRun ppl = test::run_tool("kiln-perplexity", "-m " + shell_quote(path.string()) + " -f " +
                                                                    shell_quote((dir.path() / "text.txt").string()) + " -c 16");
    CHECK(ppl.status == 1);
    CHECK(ppl.err.find(expected) != std::string::npos);
}

TEST_CASE("kiln-convert refuses to write what kiln would refuse to load", "[hostile][convert]") {
    test::TempDir dir;
    const auto weights = std::filesystem::file_size(stories_hf() / "model.safetensors");
    // A context of 2^32 - 1 (config.json allows it; the loader takes up to 2^24).
    const auto context = hf_copy(dir, [](nlohmann::json& c) { c["max_position_embeddings"] = 4294967295u; });
    expect_convert_refuses(context.string(), "out.gguf (not written): llama.context_length is 4294967295 (out of range)",
                           weights, "");
    std::filesystem::remove_all(context);

    // A merge of tokens the vocabulary lacks.
    const auto merges = hf_copy(dir, nullptr, false);
    write_text(merges / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                             "merges": ["a b", "x y"]}, "pre_tokenizer": {"type": "ByteLevel"}})");
    expect_convert_refuses(merges.string(), "tokenizer.ggml.merges[1] 'x y' needs the token 'x'", weights, "");
    std::filesystem::remove_all(merges);

    // A NaN score in tokenizer.model: the first piece's score (field 1 -> piece, field 3 -> float).
    test::Bytes model = test::read_file(stories_hf() / "tokenizer.model");
    REQUIRE(model[0] == std::byte{0x0a});
    const size_t piece_length = static_cast<size_t>(model[3]);
    REQUIRE(model[2] == std::byte{0x0a});
    REQUIRE(model[4 + piece_length] == std::byte{0x15});
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(model.data() + 5 + piece_length, &nan, sizeof nan);
    const auto scores = hf_copy(dir, nullptr, false);
    test::write_file(scores / "tokenizer.model", model);
    expect_convert_refuses(scores.string(), "tokenizer.ggml.scores[0] is NaN", weights, "");
}

namespace {

// tokenizer.model with a trainer spec appended whose field `field` (41 bos_id,
// 40 unk_id) is `id`; protobuf merges repeated messages, the last value winning.
test::Bytes spm_with_id(uint32_t field, int32_t id) {
    test::Bytes model = test::read_file(stories_hf() / "tokenizer.model");
    std::vector<uint8_t> spec;
    const auto varint = [&](uint64_t v) {
        for (; v >= 0x80; v >>= 7) spec.push_back(static_cast<uint8_t>(v | 0x80));
        spec.push_back(static_cast<uint8_t>(v));
    };
    varint(field << 3);
    varint(static_cast<uint64_t>(static_cast<int64_t>(id)));  // int32 fields are sign-extended to 64 bits
    model.push_back(std::byte{0x12});
    model.push_back(static_cast<std::byte>(spec.size()));
    for (uint8_t b : spec) model.push_back(static_cast<std::byte>(b));
    return model;
}

}  // namespace

TEST_CASE("SentencePiece ids: -1 is none and converts, other ids outside the pieces are refused", "[hostile][convert]") {
    test::TempDir dir;
    const auto weights = std::filesystem::file_size(stories_hf() / "model.safetensors");
    const auto folder = hf_copy(dir);
    test::write_file(folder / "tokenizer.model", spm_with_id(41, 100000));
    expect_convert_refuses(folder.string(), "the trainer spec's bos_id is 100000, not a piece id below 512 (or -1 for none)",
                           weights, "");
    test::write_file(folder / "tokenizer.model", spm_with_id(40, -7));
    expect_convert_refuses(folder.string(), "the trainer spec's unk_id is -7", weights, "");

    // bos_id -1 (T5-style models): no BOS key, and none added to prompts.
    test::write_file(folder / "tokenizer.model", spm_with_id(41, -1));
    const std::filesystem::path out = dir.path() / "nobos.gguf";
    const test::ToolRun run = test::run_tool("kiln-convert", shell_quote(folder.string()) + " -o " + shell_quote(out.string()));
    INFO(run.err);
    REQUIRE(run.status == 0);
    const GgufFile file = GgufFile::open(out);
    CHECK(file.find("tokenizer.ggml.bos_token_id") == nullptr);
    CHECK(file.find("tokenizer.ggml.add_bos_token")->as_bool() == false);
    CHECK(file.get_int("tokenizer.ggml.eos_token_id") == 2);
    const auto tokenizer = load_tokenizer(file);
    const std::vector<int32_t> ids = tokenizer->encode("Once", tokenizer->prompt_options(false));
    REQUIRE(!ids.empty());
    CHECK(ids.front() != 1);  // no <s> in front
}

TEST_CASE("safetensors data sections with holes or trailing bytes are refused", "[hostile][safetensors]") {
    test::TempDir dir;
    const auto write = [&](const std::string& header, size_t data_bytes) {
        std::string text = header;
        text.append((8 - text.size() % 8) % 8, ' ');
        test::Bytes b(8 + text.size() + data_bytes, std::byte{0});
        const uint64_t n = text.size();
        std::memcpy(b.data(), &n, 8);
        std::memcpy(b.data() + 8, text.data(), text.size());
        const auto path = dir.path() / "x.safetensors";
        test::write_file(path, b);
        return path;
    };
    const std::string a = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": )";
    const std::string b = R"("b": {"dtype": "F32", "shape": [1], "data_offsets": )";
    CHECK(SafetensorsFile::open(write("{" + a + "[0, 8]}, " + b + "[8, 12]}}", 12)).tensors().size() == 2);
    REQUIRE_ERROR(SafetensorsFile::open(write("{" + a + "[0, 8]}, " + b + "[12, 16]}}", 16)),
                  "bytes 8..12 of the data section belong to no tensor (a hole before 'b')");
    REQUIRE_ERROR(SafetensorsFile::open(write("{" + a + "[4, 12]}, " + b + "[12, 16]}}", 16)),
                  "bytes 0..4 of the data section belong to no tensor (a hole before 'a')");
    REQUIRE_ERROR(SafetensorsFile::open(write("{" + a + "[0, 8]}, " + b + "[8, 12]}}", 20)),
                  "the data section has 20 bytes but its tensors end at byte 12");
    REQUIRE_ERROR(SafetensorsFile::open(write("{" + a + "[0, 8]}, " + b + "[4, 8]}}", 8)), "overlap");
    REQUIRE_ERROR(SafetensorsFile::open(write(R"({"__metadata__": {"k": )" + nested_arrays(200) + "}}", 0)),
                  "the header nests arrays or objects more than 128 levels deep");
}
