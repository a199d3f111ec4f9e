// safetensors reading (independent Python-written fixtures), writing (round
// trip) and the Hugging Face llama mapping (against stories260K.gguf).
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "formats/checkpoint/safetensors.h"
#include "support/paths.h"
#include "support/sample_gguf.h"

using namespace kiln;
using kiln::test::Bytes;

namespace {

std::filesystem::path st_fixture(const std::string& name) { return kiln::test::fixtures_dir() / "safetensors" / name; }

template <typename T>
std::vector<T> values(std::span<const std::byte> data) {
    std::vector<T> out(data.size() / sizeof(T));
    std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
}

std::string error_of(const std::filesystem::path& path) {
    try {
        SafetensorsFile::open(path);
    } catch (const Error& e) {
        CHECK(e.component() == "safetensors");
        return e.what();
    }
    FAIL("no error for " << path);
    return {};
}

}  // namespace

TEST_CASE("safetensors: reads F32, F16, BF16, scalar, empty and metadata", "[safetensors]") {
    const SafetensorsFile f = SafetensorsFile::open(st_fixture("small.safetensors"));
    std::vector<std::string> names;
    for (const SafetensorsTensor& t : f.tensors()) names.push_back(t.name);
    // Data order, not the header's key order (scalar, c, empty, a, b).
    CHECK(names == std::vector<std::string>{"a", "b", "c", "scalar", "empty"});

    const SafetensorsTensor* a = f.find_tensor("a");
    REQUIRE(a != nullptr);
    CHECK(a->type == DType::F32);
    CHECK(a->shape == std::vector<uint64_t>{2, 3});
    CHECK(values<float>(a->data) == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f});

    const SafetensorsTensor* b = f.find_tensor("b");
    REQUIRE(b != nullptr);
    CHECK(b->type == DType::F16);
    std::vector<float> bf;
    for (uint16_t h : values<uint16_t>(b->data)) bf.push_back(fp16_to_fp32(h));
    CHECK(bf == std::vector<float>{1, -2, 0.25f, 65504});

    const SafetensorsTensor* c = f.find_tensor("c");
    REQUIRE(c != nullptr);
    CHECK(c->type == DType::BF16);
    CHECK(c->shape == std::vector<uint64_t>{2, 2});
    std::vector<float> cf;
    for (uint16_t h : values<uint16_t>(c->data)) cf.push_back(bf16_to_fp32(h));
    CHECK(cf == std::vector<float>{1, -1.5f, 3, 0.0078125f});

    const SafetensorsTensor* s = f.find_tensor("scalar");
    REQUIRE(s != nullptr);
    CHECK(s->shape.empty());
    CHECK(values<float>(s->data) == std::vector<float>{7});
    REQUIRE(f.find_tensor("empty") != nullptr);
    CHECK(f.find_tensor("empty")->data.empty());
    CHECK(f.find_tensor("missing") == nullptr);

    CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "kiln fixture"}});
}

TEST_CASE("safetensors: views point into the mapping (zero copy)", "[safetensors]") {
    const SafetensorsFile f = SafetensorsFile::open(st_fixture("small.safetensors"));
    const Bytes file = kiln::test::read_file(st_fixture("small.safetensors"));
    const SafetensorsTensor& last = f.tensors().back();
    // Data: a (24 bytes), b (8), c (8), scalar (4), empty (0) at the file's end.
    const std::byte* first = f.tensors().front().data.data();
    CHECK(last.data.data() - first == 24 + 8 + 8 + 4);
    CHECK(std::memcmp(first, file.data() + (file.size() - 44), 24) == 0);
}

TEST_CASE("safetensors: malformed files give clear errors", "[safetensors]") {
    CHECK_THAT(error_of(st_fixture("header_past_end.safetensors")), Catch::Contains("header length is") &&
                                                                          Catch::Contains("follow it"));
    CHECK_THAT(error_of(st_fixture("overlap.safetensors")), Catch::Contains("'x'") && Catch::Contains("'y'") &&
                                                                  Catch::Contains("overlap"));
    CHECK_THAT(error_of(st_fixture("unknown_dtype.safetensors")), Catch::Contains("F8_E4M3") &&
                                                                        Catch::Contains("cannot read"));
    CHECK_THAT(error_of(st_fixture("size_mismatch.safetensors")), Catch::Contains("F32 [3] (12 bytes)") &&
                                                                        Catch::Contains("span 8 bytes"));
    CHECK_THAT(error_of(st_fixture("truncated.safetensors")), Catch::Contains("truncated"));
    CHECK_THAT(error_of(st_fixture("invalid_json.safetensors")), Catch::Contains("not valid JSON"));
    CHECK_THAT(error_of(st_fixture("duplicate_name.safetensors")), Catch::Contains("'x' twice"));
    CHECK_THROWS_WITH(SafetensorsFile::open(st_fixture("no_such_file.safetensors")), Catch::Contains("no_such_file"));
}

TEST_CASE("safetensors: hand-made header edge cases", "[safetensors]") {
    kiln::test::TempDir dir;
    const auto make = [&](const std::string& header, size_t data_bytes, uint64_t claimed = 0) {
        kiln::test::ByteWriter w;
        w.put<uint64_t>(claimed ? claimed : header.size());
        for (char ch : header) w.put(ch);
        for (size_t i = 0; i < data_bytes; ++i) w.put<uint8_t>(0);
        const auto path = dir.path() / "x.safetensors";
        kiln::test::write_file(path, w.bytes);
        return path;
    };
    CHECK_THAT(error_of(make("[1, 2]", 0)), Catch::Contains("not an object"));
    CHECK_THAT(error_of(make(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
               Catch::Contains("shape entry"));
    CHECK_THAT(error_of(make(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4)),
               Catch::Contains("end before they begin"));
    CHECK_THAT(error_of(make(R"({"x": {"dtype": "F32", "shape": [1]}})", 4)), Catch::Contains("data_offsets"));
    CHECK_THAT(error_of(make(R"({"__metadata__": {"a": 1}})", 0)), Catch::Contains("not a string"));
    CHECK_THAT(error_of(make("{}", 0, uint64_t{1} << 40)), Catch::Contains("header length"));
    CHECK_THAT(error_of(make("", 0, 0)), Catch::Contains("not valid JSON"));
    // Nested duplicate keys are not tensor names; only the top level counts.
    const auto ok = make(R"({"x": {"dtype": "F32", "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
    CHECK(SafetensorsFile::open(ok).tensors().size() == 1);
}

TEST_CASE("safetensors: looks_like_safetensors", "[safetensors]") {
    const Bytes file = kiln::test::read_file(st_fixture("small.safetensors"));
    CHECK(looks_like_safetensors(std::span(file).first(16), file.size()));
    CHECK_FALSE(looks_like_safetensors(std::span(file).first(8), file.size()));
    CHECK_FALSE(looks_like_safetensors(std::span(file).first(16), 20));  // header longer than the file
    const Bytes gguf = kiln::test::make_sample_gguf();
    CHECK_FALSE(looks_like_safetensors(std::span(gguf).first(16), gguf.size()));
}

TEST_CASE("safetensors: write then read round trip", "[safetensors]") {
    const SafetensorsFile src = SafetensorsFile::open(st_fixture("small.safetensors"));
    kiln::test::TempDir dir;
    const auto path = dir.path() / "out.safetensors";
    // Reversed, so the written order differs from the source's.
    std::vector<SafetensorsTensor> tensors(src.tensors().rbegin(), src.tensors().rend());
    write_safetensors(path, tensors, {{"k", "v"}, {"format", "pt"}});

    const Bytes bytes = kiln::test::read_file(path);
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    CHECK((8 + header_len) % 8 == 0);
    CHECK(nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data() + 8), header_len)).is_object());

    const SafetensorsFile back = SafetensorsFile::open(path);
    REQUIRE(back.tensors().size() == tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        INFO(tensors[i].name);
        CHECK(back.tensors()[i].name == tensors[i].name);
        CHECK(back.tensors()[i].type == tensors[i].type);
        CHECK(back.tensors()[i].shape == tensors[i].shape);
        CHECK(std::equal(back.tensors()[i].data.begin(), back.tensors()[i].data.end(), tensors[i].data.begin(),
                         tensors[i].data.end()));
    }
    CHECK(back.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"k", "v"}});

    SECTION("bad input is refused and leaves no file") {
        const auto bad = dir.path() / "bad.safetensors";
        std::vector<SafetensorsTensor> wrong = {*src.find_tensor("a")};
        wrong[0].shape.push_back(2);
        CHECK_THROWS_WITH(write_safetensors(bad, wrong, {}), Catch::Contains("needs"));
        std::vector<SafetensorsTensor> twice = {tensors[0], tensors[0]};
        CHECK_THROWS_WITH(write_safetensors(bad, twice, {}), Catch::Contains("twice"));
        std::vector<SafetensorsTensor> q8 = {tensors[0]};
        q8[0].type = DType::Q8_0;
        CHECK_THROWS_WITH(write_safetensors(bad, q8, {}), Catch::Contains("q8_0"));
        CHECK_FALSE(std::filesystem::exists(bad));
    }
}

#include "formats/checkpoint/hf_llama.h"
#include "formats/gguf/gguf_file.h"

namespace {

std::filesystem::path hf_folder() { return st_fixture("stories260K_hf"); }

// The Python fixture was made from stories260K.gguf with HF's q/k permutation
// applied; mapping it back must give the GGUF's tensors byte for byte.
void check_matches_stories(const Checkpoint& c) {
    const GgufFile gguf = GgufFile::open(kiln::test::shared_models_dir() / "stories260K.gguf");
    REQUIRE(c.tensors.size() == gguf.tensors().size());
    for (size_t i = 0; i < c.tensors.size(); ++i) {
        const CheckpointTensor& t = c.tensors[i];
        INFO(t.name);
        const GgufTensor* g = gguf.find_tensor(t.name);
        REQUIRE(g != nullptr);
        CHECK(t.name == gguf.tensors()[i].name);
        CHECK(t.type == g->type);
        CHECK(t.dims == g->dims);
        CHECK(std::equal(t.data.begin(), t.data.end(), g->data.begin(), g->data.end()));
    }
    std::map<std::string, std::string> md;
    for (const GgufEntry& e : c.metadata) {
        const GgufEntry* g = nullptr;
        for (const GgufEntry& ge : gguf.metadata())
            if (ge.key == e.key) g = &ge;
        INFO(e.key);
        if (e.key == "general.name") continue;
        REQUIRE(g != nullptr);
        CHECK(e.value.type() == g->value.type());
        CHECK(e.value.as_number() == g->value.as_number());
    }
    REQUIRE(!c.metadata.empty());
    CHECK(c.metadata[0].key == "general.architecture");
}

}  // namespace

TEST_CASE("hf llama: single file maps back to stories260K.gguf exactly", "[safetensors][hf]") {
    const Checkpoint c = hf_llama_checkpoint(hf_folder());
    check_matches_stories(c);
    CHECK(c.metadata.size() == 10);  // no freq_base: rope_theta is the default
}

TEST_CASE("hf llama: sharded folder with an index", "[safetensors][hf]") {
    kiln::test::TempDir dir;
    const SafetensorsFile whole = SafetensorsFile::open(hf_folder() / "model.safetensors");
    std::vector<SafetensorsTensor> first, second;
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
    for (size_t i = 0; i < whole.tensors().size(); ++i) {
        const bool in_first = i < whole.tensors().size() / 2;
        (in_first ? first : second).push_back(whole.tensors()[i]);
        index["weight_map"][whole.tensors()[i].name] =
            in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors(dir.path() / "model-00001-of-00002.safetensors", first, {{"format", "pt"}});
    write_safetensors(dir.path() / "model-00002-of-00002.safetensors", second, {{"format", "pt"}});
    const std::string text = index.dump(2);
    kiln::test::write_file(dir.path() / "model.safetensors.index.json", std::as_bytes(std::span(text)));
    std::filesystem::copy_file(hf_folder() / "config.json", dir.path() / "config.json");

    check_matches_stories(hf_llama_checkpoint(dir.path()));

    SECTION("index naming the wrong shard") {
        index["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors";
        const std::string bad = index.dump();
        kiln::test::write_file(dir.path() / "model.safetensors.index.json", std::as_bytes(std::span(bad)));
        CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()), Catch::Contains("'lm_head.weight'") &&
                                                               Catch::Contains("does not hold it"));
    }
}

TEST_CASE("hf llama: config and tensor errors", "[safetensors][hf]") {
    kiln::test::TempDir dir;
    std::ifstream in(hf_folder() / "config.json");
    const nlohmann::json config = nlohmann::json::parse(in);
    const auto with_config = [&](const nlohmann::json& cfg) {
        const std::string text = cfg.dump();
        kiln::test::write_file(dir.path() / "config.json", std::as_bytes(std::span(text)));
    };
    std::filesystem::copy_file(hf_folder() / "model.safetensors", dir.path() / "model.safetensors");

    nlohmann::json cfg = config;
    cfg["architectures"] = {"FalconForCausalLM"};
    with_config(cfg);
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()),
                      Catch::Contains("FalconForCausalLM") && Catch::Contains("LlamaForCausalLM"));
    // Mistral is llama's layout (its sliding_window ignored, as llama.cpp's converter does).
    cfg["architectures"] = {"MistralForCausalLM"};
    with_config(cfg);
    CHECK(hf_llama_checkpoint(dir.path()).tensors.size() == 3 + 5 * 9);

    cfg = config;
    cfg["intermediate_size"] = 200;
    with_config(cfg);
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()), Catch::Contains("model.layers.0.mlp.gate_proj.weight") &&
                                                           Catch::Contains("(172, 64)") && Catch::Contains("(200, 64)"));

    cfg = config;
    cfg["num_hidden_layers"] = 6;
    with_config(cfg);
    // Checked against the layers the tensors hold before any per-layer work.
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()),
                      Catch::Contains("config.json's num_hidden_layers is 6 but the tensors hold 5 layers"));

    cfg = config;
    cfg["num_hidden_layers"] = 4;
    with_config(cfg);
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()), Catch::Contains("model.layers.4.") &&
                                                           Catch::Contains("not part of"));

    cfg = config;
    cfg["tie_word_embeddings"] = true;
    cfg["rope_theta"] = 500000.0;
    with_config(cfg);
    {
        // Tied: lm_head.weight (some exports keep a copy) is not written; llama.cpp reuses token_embd.
        const Checkpoint tied = hf_llama_checkpoint(dir.path());
        CHECK(tied.tensors.size() == 2 + 5 * 9);
        for (const CheckpointTensor& t : tied.tensors) CHECK(t.name != "output.weight");
        REQUIRE(tied.metadata.size() == 11);
        CHECK(tied.metadata.back().key == "llama.rope.freq_base");
        CHECK(tied.metadata.back().value.as_number() == 500000.0);
    }

    cfg = config;
    cfg.erase("hidden_size");
    with_config(cfg);
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()), Catch::Contains("hidden_size"));

    std::filesystem::remove(dir.path() / "model.safetensors");
    with_config(config);
    CHECK_THROWS_WITH(hf_llama_checkpoint(dir.path()), Catch::Contains("model.safetensors.index.json"));
}
