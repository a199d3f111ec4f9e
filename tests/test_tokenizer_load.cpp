// load_tokenizer: the tokenizer.ggml.model of a GGUF file picks the tokenizer,
// and all three kinds work through the Tokenizer interface.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/char_tokenizer.h"
#include "formats/tokenizer/gpt2_tokenizer.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/paths.h"

using namespace kiln;

namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
    return load_tokenizer(GgufFile::open(test::shared_models_dir() / "vocab" / name));
}

std::unique_ptr<Tokenizer> load_bytes(const GgufWriter& w) {
    const std::vector<std::byte> bytes = w.to_bytes();
    return load_tokenizer(GgufFile::parse(bytes, "vocab.gguf"));
}

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

TEST_CASE("load_tokenizer: the LLaMA vocabulary gives the SPM tokenizer", "[tokenizer]") {
    // The tokenizer outlives the file it was read from.
    const std::unique_ptr<Tokenizer> tok = load_vocab("ggml-vocab-llama-spm.gguf");
    REQUIRE(dynamic_cast<const SpmTokenizer*>(tok.get()) != nullptr);
    CHECK(tok->vocab_size() == 32000);
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
    CHECK(tok->pad() == -1);
    CHECK(tok->add_bos());
    CHECK(tok->add_space_prefix());
    // Published LLaMA ids (see test_tokenizer.cpp).
    CHECK(tok->encode("Hello world", true) == Ids{1, 15043, 3186});
    CHECK(tok->decode(Ids{1, 15043, 3186}) == "Hello world");
    CHECK(tok->decode(Ids{3186}, false) == " world");
    CHECK(tok->piece(15043) == " Hello");
    CHECK(tok->token_text(15043) == "\xE2\x96\x81Hello");
}

TEST_CASE("load_tokenizer: the GPT-2 vocabulary gives the GPT-2 tokenizer", "[tokenizer]") {
    const std::unique_ptr<Tokenizer> tok = load_vocab("ggml-vocab-gpt-2.gguf");
    REQUIRE(dynamic_cast<const Gpt2Tokenizer*>(tok.get()) != nullptr);
    CHECK(tok->vocab_size() == 50257);
    CHECK(tok->eos() == 50256);
    CHECK_FALSE(tok->add_bos());
    CHECK_FALSE(tok->add_space_prefix());
    // GPT-2's published ids.
    CHECK(tok->encode("Hello world", false) == Ids{15496, 995});
    CHECK(tok->decode(Ids{15496, 995}) == "Hello world");
    CHECK(tok->decode(Ids{995}, false) == " world");
}

TEST_CASE("load_tokenizer: a char vocabulary gives the char tokenizer", "[tokenizer]") {
    GgufWriter w;
    w.set("tokenizer.ggml.model", "char");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"<pad>", "h", "i"}));
    w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, {3, 1, 1}));
    w.set("tokenizer.ggml.padding_token_id", uint32_t{0});
    const std::unique_ptr<Tokenizer> tok = load_bytes(w);
    REQUIRE(dynamic_cast<const CharTokenizer*>(tok.get()) != nullptr);
    CHECK(tok->pad() == 0);
    CHECK(tok->bos() == -1);
    CHECK(tok->encode("hih", true) == Ids{1, 2, 1});  // no BOS to add
    CHECK(tok->decode(Ids{0, 1, 2}) == "hi");
}

TEST_CASE("load_tokenizer: unknown or missing models are errors listing the known ones", "[tokenizer]") {
    SECTION("an unknown model") {
        GgufWriter w;
        w.set("tokenizer.ggml.model", "bert");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"a"}));
        try {
            load_bytes(w);
            FAIL("no error for an unknown model");
        } catch (const Error& e) {
            CHECK(e.component() == "tokenizer");
            const std::string what = e.what();
            CHECK(contains(what, "'bert'"));
            CHECK(contains(what, "'llama'"));
            CHECK(contains(what, "'gpt2'"));
            CHECK(contains(what, "'char'"));
        }
    }
    SECTION("no model key") {
        GgufWriter w;
        w.set("general.architecture", "llama");
        CHECK_THROWS_WITH(load_bytes(w), Catch::Contains("tokenizer.ggml.model"));
    }
    SECTION("a model key that is not a string") {
        GgufWriter w;
        w.set("tokenizer.ggml.model", uint32_t{2});
        CHECK_THROWS_WITH(load_bytes(w), Catch::Contains("tokenizer.ggml.model"));
    }
}
