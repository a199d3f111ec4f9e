// llama2.c checkpoints (legacy, "ak42" v1 and v2) and tokenizer.bin read into a
// kiln::Checkpoint. The real stories260K.bin + tok512.bin must give exactly the
// tensors and vocabulary of llama.cpp's stories260K.gguf (converted from the
// same files); the small fixtures (tests/reference/make_llama2c_fixtures.py)
// cover every layout against numpy's expectations; corrupt inputs must each
// give one clear kiln::Error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "formats/checkpoint/llama2c.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/sample_gguf.h"

namespace fs = std::filesystem;
using namespace kiln;
using test::Bytes;

namespace {

fs::path fixture(std::string_view name) { return test::fixtures_dir() / "llama2c" / name; }
fs::path shared_model(std::string_view name) { return test::shared_models_dir() / name; }

const CheckpointTensor* find_tensor(const Checkpoint& cp, std::string_view name) {
    for (const auto& t : cp.tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

const GgufValue* find_meta(const Checkpoint& cp, std::string_view key) {
    for (const auto& e : cp.metadata) {
        if (e.key == key) return &e.value;
    }
    return nullptr;
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

std::vector<std::string> tensor_names(const Checkpoint& cp) {
    std::vector<std::string> names;
    for (const auto& t : cp.tensors) names.push_back(t.name);
    return names;
}

// The expected file's tensor names in order, without output.weight when the
// checkpoint shares its classifier with the embedding.
std::vector<std::string> expected_names(const GgufFile& expected, bool shared) {
    std::vector<std::string> names;
    for (const auto& t : expected.tensors()) {
        if (!(shared && t.name == "output.weight")) names.push_back(t.name);
    }
    return names;
}

void require_tensors_equal(const Checkpoint& cp, const GgufFile& expected, bool shared) {
    REQUIRE(tensor_names(cp) == expected_names(expected, shared));
    for (const auto& t : cp.tensors) {
        INFO(t.name);
        const GgufTensor& want = expected.get_tensor(t.name);
        CHECK(t.type == want.type);
        CHECK(t.dims == want.dims);
        CHECK(same_bytes(t.data, want.data));
    }
}

Bytes head_of(const Bytes& bytes) { return Bytes(bytes.begin(), bytes.begin() + std::min<size_t>(bytes.size(), 256)); }

bool detect(const Bytes& bytes) { return looks_like_llama2c(head_of(bytes), bytes.size()); }

// Reads `model` (with `tokenizer` when given) expecting failure; returns the message.
std::string read_error(const fs::path& model, const fs::path* tokenizer = nullptr) {
    try {
        read_llama2c(model, tokenizer);
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("the bad input was accepted: " << model.string());
    return {};
}

// The message names the component and the file first, is one line, and says `fragment`.
void check_error(const std::string& message, const fs::path& named, std::string_view fragment) {
    INFO(message);
    CHECK(message.rfind("[llama2c] " + named.string() + ": ", 0) == 0);
    CHECK(message.find(fragment) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
}

void require_model_error(const fs::path& model, std::string_view fragment) {
    check_error(read_error(model), model, fragment);
}

// Byte offsets of the 7 config fields in the two header kinds.
constexpr size_t kLegacyConfig = 0;
constexpr size_t kVersionedConfig = 8;
enum Field : size_t { kDim, kHidden, kLayers, kHeads, kKvHeads, kVocab, kSeq };

Bytes with_field(Bytes bytes, size_t config_at, Field field, int32_t value) {
    test::patch<int32_t>(bytes, config_at + 4 * field, value);
    return bytes;
}

struct Variant {
    const char* file;
    const char* expected;
    bool shared;
    bool quantized;
};

constexpr Variant kVariants[] = {
    {"legacy_shared.bin", "expected_f32.gguf", true, false}, {"legacy_unshared.bin", "expected_f32.gguf", false, false},
    {"v1_shared.bin", "expected_f32.gguf", true, false},     {"v1_unshared.bin", "expected_f32.gguf", false, false},
    {"v2_shared.bin", "expected_q8.gguf", true, true},       {"v2_unshared.bin", "expected_q8.gguf", false, true},
};

}  // namespace

TEST_CASE("stories260K.bin + tok512.bin read as llama.cpp's stories260K.gguf", "[llama2c]") {
    const fs::path bin = shared_model("stories260K.bin");
    const fs::path tok = shared_model("tok512.bin");
    const Checkpoint cp = read_llama2c(bin, &tok);
    const GgufFile gguf = GgufFile::open(shared_model("stories260K.gguf"));

    // The .bin shares its classifier (positive vocab_size), so kiln writes no
    // output.weight; llama.cpp's converter stored a copy of the embedding.
    require_tensors_equal(cp, gguf, /*shared=*/true);
    CHECK(same_bytes(gguf.get_tensor("output.weight").data, find_tensor(cp, "token_embd.weight")->data));
    CHECK(cp.tensors.size() == 47);
    CHECK(cp.owned.empty());  // float32 already: every tensor is a view of the mapping
    CHECK(cp.source != nullptr);

    const std::vector<std::string> keys = {
        "general.architecture",          "general.name",
        "llama.context_length",          "llama.embedding_length",
        "llama.feed_forward_length",     "llama.block_count",
        "llama.attention.head_count",    "llama.attention.head_count_kv",
        "llama.rope.dimension_count",    "llama.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model",          "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",         "tokenizer.ggml.token_type",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id"};
    std::vector<std::string> got_keys;
    for (const auto& e : cp.metadata) got_keys.push_back(e.key);
    CHECK(got_keys == keys);
    for (const auto& key : keys) {
        if (key == "general.name" || key == "llama.context_length") continue;
        INFO(key);
        REQUIRE(gguf.find(key) != nullptr);
        CHECK(*find_meta(cp, key) == *gguf.find(key));  // same value and same GGUF type
    }
    CHECK(*find_meta(cp, "general.name") == GgufValue("stories260K"));
    // The .bin's seq_len is 512; llama.cpp's converter wrote its own default, 2048.
    CHECK(*find_meta(cp, "llama.context_length") == GgufValue(uint32_t{512}));
    CHECK(*gguf.find("llama.context_length") == GgufValue(uint32_t{2048}));

    // Spot checks of the restored SentencePiece spelling.
    const auto& tokens = find_meta(cp, "tokenizer.ggml.tokens")->as_array()->items;
    REQUIRE(tokens.size() == 512);
    CHECK(*tokens[1].as_string() == "<s>");
    CHECK(*tokens[2].as_string() == "</s>");
    CHECK(*tokens[259].as_string() == "\xE2\x96\x81t");  // " t" in tok512.bin
}

TEST_CASE("every llama2.c layout of the fixture model gives the expected tensors and metadata", "[llama2c]") {
    const fs::path tok = fixture("tok64.bin");
    for (const Variant& v : kVariants) {
        SECTION(v.file) {
            const Checkpoint cp = read_llama2c(fixture(v.file), &tok);
            const GgufFile expected = GgufFile::open(fixture(v.expected));
            require_tensors_equal(cp, expected, v.shared);
            CHECK(cp.owned.empty() == !v.quantized);
            REQUIRE(cp.metadata.size() == expected.metadata().size());
            for (size_t i = 0; i < cp.metadata.size(); ++i) {
                const GgufEntry& want = expected.metadata()[i];
                INFO(want.key);
                CHECK(cp.metadata[i].key == want.key);
                if (want.key == "general.name") {
                    CHECK(cp.metadata[i].value == GgufValue(fs::path(v.file).stem().string()));
                } else {
                    CHECK(cp.metadata[i].value == want.value);
                }
            }
        }
    }
}

TEST_CASE("without a tokenizer only the model's metadata is written", "[llama2c]") {
    const Checkpoint cp = read_llama2c(fixture("v1_unshared.bin"), nullptr);
    CHECK(cp.metadata.size() == 10);
    CHECK(find_meta(cp, "tokenizer.ggml.tokens") == nullptr);
    CHECK(*find_meta(cp, "llama.attention.layer_norm_rms_epsilon") == GgufValue(1e-5f));
    CHECK(cp.tensors.size() == 3 + 2 * 9);
}

TEST_CASE("a moved checkpoint keeps its tensors valid", "[llama2c]") {
    // Tensors view the mapping held by Checkpoint::source, and owned buffers
    // whose storage survives moving the checkpoint.
    Checkpoint moved;
    {
        Checkpoint cp = read_llama2c(fixture("v2_unshared.bin"), nullptr);
        moved = std::move(cp);
    }
    const GgufFile expected = GgufFile::open(fixture("expected_q8.gguf"));
    require_tensors_equal(moved, expected, false);
}

TEST_CASE("looks_like_llama2c recognises llama2.c files by content", "[llama2c]") {
    for (const Variant& v : kVariants) {
        INFO(v.file);
        CHECK(detect(test::read_file(fixture(v.file))));
    }
    CHECK(detect(test::read_file(shared_model("stories260K.bin"))));

    CHECK_FALSE(detect(test::read_file(shared_model("stories260K.gguf"))));
    CHECK_FALSE(detect(test::read_file(fixture("expected_f32.gguf"))));
    CHECK_FALSE(detect(test::read_file(shared_model("tok512.bin"))));
    CHECK_FALSE(detect(test::read_file(fixture("tok64.bin"))));
    CHECK_FALSE(detect(Bytes{}));
    CHECK_FALSE(looks_like_llama2c({}, 1000));

    Bytes zip = test::read_file(fixture("legacy_shared.bin"));
    std::memcpy(zip.data(), "PK\x03\x04", 4);
    CHECK_FALSE(detect(zip));

    std::mt19937 rng(7);
    for (size_t size : {size_t{4}, size_t{27}, size_t{28}, size_t{256}, size_t{4096}, size_t{83100}}) {
        Bytes noise(size);
        for (auto& b : noise) b = std::byte(rng() & 0xFF);
        INFO(size);
        CHECK_FALSE(detect(noise));
    }

    // A legacy header is only believed when the size matches exactly.
    Bytes legacy = test::read_file(fixture("legacy_unshared.bin"));
    CHECK(detect(legacy));
    legacy.pop_back();
    CHECK_FALSE(detect(legacy));
    legacy.push_back(std::byte{0});
    legacy.push_back(std::byte{0});
    CHECK_FALSE(detect(legacy));
    // Flipping the classifier flag changes the implied size.
    CHECK_FALSE(detect(with_field(test::read_file(fixture("legacy_unshared.bin")), kLegacyConfig, kVocab, 64)));

    // The magic alone marks a versioned file, so a damaged one still goes to
    // the reader, whose error says what is wrong with it.
    Bytes versioned = test::read_file(fixture("v2_shared.bin"));
    versioned.resize(100);
    CHECK(detect(versioned));
}

TEST_CASE("truncated or padded llama2.c files are clear errors", "[llama2c]") {
    test::TempDir dir;
    const fs::path path = dir.path() / "cut.bin";
    for (const char* name : {"legacy_shared.bin", "legacy_unshared.bin", "v1_unshared.bin", "v2_unshared.bin"}) {
        const Bytes full = test::read_file(fixture(name));
        for (size_t size : {size_t{0}, size_t{3}, size_t{27}, size_t{40}, size_t{255}, size_t{300}, full.size() / 2,
                            full.size() - 4, full.size() - 1}) {
            INFO(name << " cut to " << size);
            test::write_file(path, std::span(full).first(size));
            const std::string message = read_error(path);
            check_error(message, path, "");
            CHECK((message.find("truncated") != std::string::npos || message.find("too few") != std::string::npos));
        }
        Bytes longer = full;
        longer.push_back(std::byte{0});
        test::write_file(path, longer);
        INFO(name << " with a trailing byte");
        require_model_error(path, "trailing data");
    }
}

TEST_CASE("corrupt llama2.c headers are clear errors", "[llama2c]") {
    test::TempDir dir;
    const fs::path path = dir.path() / "bad.bin";
    const Bytes legacy = test::read_file(fixture("legacy_shared.bin"));
    const Bytes v1 = test::read_file(fixture("v1_unshared.bin"));
    const Bytes v2 = test::read_file(fixture("v2_shared.bin"));
    const auto require = [&](const Bytes& bytes, std::string_view fragment) {
        test::write_file(path, bytes);
        require_model_error(path, fragment);
    };

    SECTION("wrong magic or version") {
        Bytes bad_magic = v1;
        bad_magic[0] = std::byte{'3'};  // "ak43": read as a legacy header, which makes no sense
        require(bad_magic, "not a llama2.c checkpoint");
        Bytes version = v1;
        test::patch<int32_t>(version, 4, 3);
        require(version, "unsupported \"ak42\" version 3");
        test::patch<int32_t>(version, 4, 0);
        require(version, "unsupported \"ak42\" version 0");
    }
    SECTION("implausible hyper-parameters") {
        require(with_field(legacy, kLegacyConfig, kVocab, 0), "vocab_size is 0");
        require(with_field(v1, kVersionedConfig, kVocab, 0), "vocab_size is 0");
        require(with_field(v1, kVersionedConfig, kVocab, -64), "vocab_size must be positive");
        require(with_field(legacy, kLegacyConfig, kVocab, INT32_MIN), "cannot be negated");
        require(with_field(legacy, kLegacyConfig, kHeads, 5), "n_heads 5 does not divide dim 32");
        require(with_field(v2, kVersionedConfig, kHeads, 3), "n_heads 3 does not divide dim 32");
        require(with_field(legacy, kLegacyConfig, kKvHeads, 3), "n_kv_heads 3 does not divide n_heads 4");
        require(with_field(legacy, kLegacyConfig, kHeads, 32), "head_dim 1 is odd");
        require(with_field(legacy, kLegacyConfig, kDim, -32), "dim must be positive");
        require(with_field(v1, kVersionedConfig, kLayers, 0), "n_layers must be positive");
        require(with_field(legacy, kLegacyConfig, kSeq, 0), "seq_len must be positive");
    }
    SECTION("counts whose product overflows 64 bits, or merely huge ones") {
        Bytes huge = legacy;
        for (Field f : {kDim, kHidden, kLayers, kVocab, kSeq}) huge = with_field(huge, kLegacyConfig, f, 1 << 30);
        require(huge, "beyond 2^64 bytes");
        Bytes huge_v1 = v1;
        for (Field f : {kDim, kHidden, kLayers, kVocab, kSeq}) huge_v1 = with_field(huge_v1, kVersionedConfig, f, 1 << 30);
        require(huge_v1, "beyond 2^64 bytes");
        Bytes big = legacy;
        for (Field f : {kDim, kHidden, kLayers}) big = with_field(big, kLegacyConfig, f, 1 << 16);
        require(big, "truncated");  // fits in 64 bits, but far more than the file holds
    }
    SECTION("flags and group sizes") {
        Bytes flag = v1;
        flag[36] = std::byte{2};
        require(flag, "shared-classifier flag is 2");
        flag[36] = std::byte{1};  // says shared, but the classifier is there
        require(flag, "trailing data");
        Bytes group = v2;
        test::patch<int32_t>(group, 37, 0);
        require(group, "group size must be positive, got 0");
        test::patch<int32_t>(group, 37, -32);
        require(group, "group size must be positive, got -32");
        test::patch<int32_t>(group, 37, 48);
        require(group, "not a whole number of 48-value quantization groups");
        test::patch<int32_t>(group, 37, 16);  // divides everything, but the file was written with 32
        require(group, "truncated");
    }
    SECTION("other kinds of file") {
        const fs::path gguf = shared_model("stories260K.gguf");
        require_model_error(gguf, "this is a GGUF file");
        Bytes zip = legacy;
        std::memcpy(zip.data(), "PK\x03\x04", 4);
        require(zip, "zip archive");
        require(Bytes{}, "too few");
    }
}

TEST_CASE("bad tokenizer.bin files are clear errors", "[llama2c]") {
    test::TempDir dir;
    const fs::path model = fixture("v1_shared.bin");
    const fs::path path = dir.path() / "tok.bin";
    const Bytes good = test::read_file(fixture("tok64.bin"));
    const auto require = [&](const Bytes& bytes, std::string_view fragment) {
        test::write_file(path, bytes);
        check_error(read_error(model, &path), path, fragment);
    };

    SECTION("truncated") {
        require(Bytes(good.begin(), good.begin() + 2), "too few for its 4-byte header");
        require(Bytes(good.begin(), good.begin() + 4), "holds 0 tokens but the model's vocabulary has 64");
        require(Bytes(good.begin(), good.begin() + 9), "token 0 is cut off at byte 4");
        require(Bytes(good.begin(), good.begin() + 14), "token 0 claims 5 bytes but only 2 remain");
        require(Bytes(good.begin(), good.end() - 1), "token 63 claims");
    }
    SECTION("a negative length") {
        Bytes bad = good;
        test::patch<int32_t>(bad, 8, -5);  // token 0's length
        require(bad, "token 0 has a negative length -5");
    }
    SECTION("a different vocabulary size") {
        Bytes longer = good;
        const Bytes extra = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                             std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{'x'}};
        longer.insert(longer.end(), extra.begin(), extra.end());
        require(longer, "more than the model's 64 tokens");
        const fs::path tok512 = shared_model("tok512.bin");
        check_error(read_error(model, &tok512), tok512, "more than the model's 64 tokens");
        const fs::path tok64 = fixture("tok64.bin");
        const fs::path stories = shared_model("stories260K.bin");
        check_error(read_error(stories, &tok64), tok64, "holds 64 tokens but the model's vocabulary has 512");
    }
}

TEST_CASE("randomly damaged llama2.c headers give a checkpoint or a kiln::Error, never a crash", "[llama2c]") {
    // Bytes in the header region are overwritten at random; whatever the
    // reader makes of them must be a valid result or a clean kiln::Error (any
    // other exception, e.g. std::bad_alloc, fails the test).
    test::TempDir dir;
    const fs::path path = dir.path() / "damaged.bin";
    std::mt19937 rng(2024);
    size_t accepted = 0;
    for (const Variant& v : kVariants) {
        const Bytes good = test::read_file(fixture(v.file));
        for (int round = 0; round < 150; ++round) {
            Bytes bad = good;
            const int flips = 1 + int(rng() % 4);
            for (int i = 0; i < flips; ++i) bad[rng() % 48] = std::byte(rng() & 0xFF);
            test::write_file(path, bad);
            INFO(v.file << " round " << round);
            try {
                const Checkpoint cp = read_llama2c(path, nullptr);
                CHECK(!cp.tensors.empty());
                ++accepted;
            } catch (const Error& e) {
                CHECK(std::string_view(e.what()).rfind("[llama2c] ", 0) == 0);
            }
        }
    }
    // Only changes the layout cannot see (padding, unused bytes) may pass.
    CHECK(accepted < 6 * 150 / 2);
}
