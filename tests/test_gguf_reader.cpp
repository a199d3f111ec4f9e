// The GGUF reader on real files written by llama.cpp's tools and on kiln's sample.
#include <catch2/catch.hpp>

#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/sample_gguf.h"

using namespace kiln;
using kiln::test::shared_models_dir;

TEST_CASE("reads stories260K.gguf written by llama.cpp", "[gguf]") {
    const GgufFile f = GgufFile::open(shared_models_dir() / "stories260K.gguf");
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.tensors().size() == 48);
    // Hyper-parameters as listed for this model in ../shared/models/README.md.
    CHECK(f.get_int("llama.embedding_length") == 64);
    CHECK(f.get_int("llama.feed_forward_length") == 172);
    CHECK(f.get_int("llama.block_count") == 5);
    CHECK(f.get_int("llama.attention.head_count") == 8);
    CHECK(f.get_int("llama.attention.head_count_kv") == 4);
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
    const GgufArray* tokens = f.find("tokenizer.ggml.tokens")->as_array();
    REQUIRE(tokens != nullptr);
    CHECK(tokens->element_type == GgufType::STRING);
    CHECK(tokens->items.size() == 512);
    CHECK(*tokens->items[1].as_string() == "<s>");

    const GgufTensor& embd = f.get_tensor("token_embd.weight");
    CHECK(embd.type == DType::F32);
    CHECK(embd.dims == std::vector<uint64_t>{64, 512});
    CHECK(embd.data.size() == 64 * 512 * 4);
    // Zero-copy: the view points into the file's own bytes, aligned as promised.
    CHECK(embd.data.data() >= f.bytes().data());
    CHECK(embd.data.data() + embd.data.size() <= f.bytes().data() + f.bytes().size());
    CHECK((embd.data.data() - f.bytes().data()) % 32 == 0);
    CHECK_THROWS_WITH(f.get_tensor("no.such.tensor"), Catch::Contains("tensor 'no.such.tensor' is missing"));
    CHECK_THROWS_WITH(f.get_int("general.architecture"), Catch::Contains("expected an integer"));
}

TEST_CASE("tensor views hold the same weights as the llama2.c file of the same model", "[gguf]") {
    // stories260K.bin: 7 int32 header, then the token embedding table (vocab x dim f32).
    const auto bin = test::read_file(shared_models_dir() / "stories260K.bin");
    const GgufFile f = GgufFile::open(shared_models_dir() / "stories260K.gguf");
    const GgufTensor& embd = f.get_tensor("token_embd.weight");
    REQUIRE(bin.size() >= 28 + embd.data.size());
    CHECK(std::memcmp(bin.data() + 28, embd.data.data(), embd.data.size()) == 0);
}

TEST_CASE("reads vocabulary-only files (no tensors)", "[gguf]") {
    const GgufFile spm = GgufFile::open(shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf");
    CHECK(spm.tensors().empty());
    CHECK(spm.get_string("tokenizer.ggml.model") == "llama");
    CHECK(spm.find("tokenizer.ggml.tokens")->as_array()->items.size() == 32000);
    CHECK(spm.find("tokenizer.ggml.scores")->as_array()->element_type == GgufType::FLOAT32);

    const GgufFile gpt2 = GgufFile::open(shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf");
    CHECK(gpt2.get_string("tokenizer.ggml.model") == "gpt2");
    CHECK(gpt2.find("tokenizer.ggml.tokens")->as_array()->items.size() == 50257);
    CHECK(gpt2.find("tokenizer.ggml.merges")->as_array()->items.size() == 50000);
}

TEST_CASE("reads every metadata value type, nested arrays included", "[gguf]") {
    const auto bytes = test::make_sample_gguf();
    const GgufFile f = GgufFile::parse(bytes, "sample.gguf");
    CHECK(f.find("kiln.u8")->value == GgufValue::Storage(uint8_t{200}));
    CHECK(f.find("kiln.i8")->value == GgufValue::Storage(int8_t{-100}));
    CHECK(f.find("kiln.u16")->value == GgufValue::Storage(uint16_t{60000}));
    CHECK(f.find("kiln.i16")->value == GgufValue::Storage(int16_t{-30000}));
    CHECK(f.find("kiln.u32")->value == GgufValue::Storage(uint32_t{4000000000u}));
    CHECK(f.find("kiln.i32")->value == GgufValue::Storage(int32_t{-2000000000}));
    CHECK(f.find("kiln.f32")->value == GgufValue::Storage(1.5f));
    CHECK(f.find("kiln.bool")->value == GgufValue::Storage(true));
    CHECK(*f.find("kiln.string")->as_string() == "héllo\nworld");
    CHECK(f.find("kiln.u64")->value == GgufValue::Storage(uint64_t{1} << 60));
    CHECK(f.find("kiln.i64")->value == GgufValue::Storage(-(int64_t{1} << 60)));
    CHECK(f.find("kiln.f64")->value == GgufValue::Storage(2.25));
    for (uint32_t t = 0; t < kGgufTypeCount; ++t) {
        // Every type id appears at least once among the sample's scalar keys or arrays.
        bool seen = false;
        for (const GgufEntry& e : f.metadata()) seen |= static_cast<uint32_t>(e.value.type()) == t;
        INFO("type " << t);
        CHECK(seen);
    }
    const GgufArray& nested = *f.find("kiln.array.nested")->as_array();
    REQUIRE(nested.items.size() == 2);
    CHECK(nested.items[0].as_array()->items[1].value == GgufValue::Storage(-0.25f));
    CHECK(nested.items[1].as_array()->items.empty());
    CHECK(f.find("kiln.array.str")->as_array()->items[2] == GgufValue("ccc"));

    CHECK(f.tensors().size() == 3);
    CHECK(f.get_tensor("tensor.q").type == DType::Q8_0);
    CHECK(f.get_tensor("tensor.q").data.size() == 68);
    CHECK(f.get_tensor("tensor.b").elements == 5);
}

TEST_CASE("reads GGUF version 2 files", "[gguf]") {
    // Version 2 has the same layout as version 3 (v3 only added big-endian files).
    auto bytes = test::make_sample_gguf();
    test::patch<uint32_t>(bytes, 4, 2);
    const GgufFile f = GgufFile::parse(bytes, "v2.gguf");
    CHECK(f.version() == 2);
    CHECK(f.tensors().size() == 3);
}

TEST_CASE("typed value accessors convert only where it is exact", "[gguf]") {
    CHECK(GgufValue(uint64_t{1} << 63).as_int() == std::nullopt);
    CHECK(GgufValue(int8_t{-3}).as_int() == -3);
    CHECK(GgufValue(true).as_int() == std::nullopt);
    CHECK(GgufValue(2.5f).as_number() == 2.5);
    CHECK(GgufValue("x").as_number() == std::nullopt);
}
