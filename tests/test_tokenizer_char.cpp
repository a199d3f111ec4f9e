// The character-level vocabulary (tokenizer.ggml.model = "char") and
// char_vocabulary_of. The expected ids are positions in hand-made
// vocabularies: a character's id is its index in tokenizer.ggml.tokens.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/char_tokenizer.h"
#include "formats/tokenizer/utf8.h"

using namespace kiln;

namespace {

using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

// <pad> <s> </s> <unk> as control/unknown tokens, then the characters.
GgufWriter char_writer(const Strings& chars, bool with_unk = true) {
    Strings tokens = {"<pad>", "<s>", "</s>", "<unk>"};
    std::vector<int32_t> types = {3, 3, 3, 2};
    for (const std::string& c : chars) {
        tokens.push_back(c);
        types.push_back(1);
    }
    GgufWriter w;
    w.set("tokenizer.ggml.model", "char");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, tokens));
    w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, types));
    w.set("tokenizer.ggml.padding_token_id", uint32_t{0});
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    if (with_unk) w.set("tokenizer.ggml.unknown_token_id", uint32_t{3});
    return w;
}

CharTokenizer build(const GgufWriter& w) {
    const std::vector<std::byte> bytes = w.to_bytes();
    return CharTokenizer(GgufFile::parse(bytes, "chars.gguf"));
}

std::string error_of(auto&& action) {
    try {
        action();
    } catch (const Error& e) {
        CHECK(e.component() == "tokenizer");
        return e.what();
    }
    FAIL("no error");
    return {};
}

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

TEST_CASE("Char tokenizer: one token per character, special ids, round trip", "[tokenizer][char]") {
    // ids: 4 ' ', 5 'a', 6 'b', 7 'é', 8 '日', 9 '😀', 10 '\n'
    const CharTokenizer tok = build(char_writer({" ", "a", "b", "é", "日", "😀", "\n"}));
    CHECK(tok.vocab_size() == 11);
    CHECK(tok.pad() == 0);
    CHECK(tok.bos() == 1);
    CHECK(tok.eos() == 2);
    CHECK(tok.unk() == 3);
    CHECK_FALSE(tok.add_bos());
    CHECK_FALSE(tok.add_space_prefix());
    CHECK(tok.encode("ab a", false) == Ids{5, 6, 4, 5});
    CHECK(tok.encode("ab a", true) == Ids{1, 5, 6, 4, 5});
    CHECK(tok.encode("é日😀\n", false) == Ids{7, 8, 9, 10});
    CHECK(tok.encode("", false).empty());
    CHECK(tok.encode("", true) == Ids{1});
    const std::string text = "a b\né 日😀 ba";
    CHECK(tok.decode(tok.encode(text, false)) == text);
    CHECK(tok.decode(tok.encode(text, true)) == text);
    CHECK(tok.piece(9) == "😀");
    CHECK(tok.token_text(9) == "😀");
    CHECK(tok.token_type(1) == TokenType::control);
    CHECK_THROWS_AS(tok.decode(Ids{11}), Error);
    CHECK_THROWS_AS(tok.piece(-1), Error);
}

TEST_CASE("Char tokenizer: control tokens are never produced and decode to nothing", "[tokenizer][char]") {
    const CharTokenizer tok = build(char_writer({"<", "s", ">", "/"}));
    // "<s>" in a text is three characters, never the BOS token.
    CHECK(tok.encode("<s>", false) == Ids{4, 5, 6});
    CHECK(tok.encode("</s>", false) == Ids{4, 7, 5, 6});
    CHECK(tok.decode(Ids{1, 4, 5, 6, 2, 0, 0}) == "<s>");
    CHECK(tok.piece(0).empty());
    CHECK(tok.piece(1).empty());
    CHECK(tok.piece(3).empty());  // the unknown token is not text either
}

TEST_CASE("Char tokenizer: unknown characters", "[tokenizer][char]") {
    SECTION("with an unknown token: it stands in") {
        const CharTokenizer tok = build(char_writer({"a", "b"}));
        CHECK(tok.encode("aXb日", false) == Ids{4, 3, 5, 3});
    }
    SECTION("without one: an error naming the character and its offset") {
        const CharTokenizer tok = build(char_writer({"a", "b"}, /*with_unk=*/false));
        CHECK(tok.unk() == -1);
        const std::string error = error_of([&] { tok.encode("ab日a", false); });
        CHECK(contains(error, "U+65E5"));
        CHECK(contains(error, "offset 2"));
        CHECK(contains(error_of([&] { tok.encode("aaaaZ", false); }), "U+005A"));
    }
}

TEST_CASE("Char tokenizer: invalid UTF-8 is an error with its offset", "[tokenizer][char]") {
    const CharTokenizer tok = build(char_writer({"a", "b"}));
    CHECK(contains(error_of([&] { tok.encode("ab\xFF", false); }), "offset 2"));
    CHECK(contains(error_of([&] { tok.encode("a\xE6\x97", false); }), "offset 1"));  // a cut character
    CHECK(contains(error_of([&] { tok.encode("\xC0\xAF", false); }), "offset 0"));   // overlong
}

TEST_CASE("Char tokenizer: vocabularies that cannot be read", "[tokenizer][char]") {
    const auto load_error = [](const GgufWriter& w) { return error_of([&] { build(w); }); };
    SECTION("a normal token of two characters") {
        CHECK(contains(load_error(char_writer({"a", "ab"})), "exactly one UTF-8 character"));
    }
    SECTION("an empty normal token") { CHECK(contains(load_error(char_writer({""})), "token 4")); }
    SECTION("a normal token that is not UTF-8") { CHECK(contains(load_error(char_writer({"\xFF"})), "token 4")); }
    SECTION("a token type a character vocabulary does not have") {
        GgufWriter w = char_writer({"a"});
        w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, {3, 3, 3, 2, 6}));
        CHECK(contains(load_error(w), "tokenizer.ggml.token_type[4]"));
    }
    SECTION("another tokenizer model") {
        GgufWriter w = char_writer({"a"});
        w.set("tokenizer.ggml.model", "gpt2");
        CHECK(contains(load_error(w), "'gpt2'"));
    }
    SECTION("an unknown token id outside the vocabulary") {
        GgufWriter w = char_writer({"a"});
        w.set("tokenizer.ggml.unknown_token_id", uint32_t{5});
        CHECK(contains(load_error(w), "tokenizer.ggml.unknown_token_id"));
    }
    SECTION("add_bos_token of the wrong type") {
        GgufWriter w = char_writer({"a"});
        w.set("tokenizer.ggml.add_bos_token", uint32_t{1});
        CHECK(contains(load_error(w), "tokenizer.ggml.add_bos_token"));
    }
}

TEST_CASE("Char tokenizer: token types are optional, add_bos_token is read", "[tokenizer][char]") {
    GgufWriter w;
    w.set("tokenizer.ggml.model", "char");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"x", "y", "x"}));
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.add_bos_token", true);
    const CharTokenizer tok = build(w);
    CHECK(tok.add_bos());
    CHECK(tok.encode("xy", true) == Ids{1, 0, 1});  // a character listed twice keeps its first id
    CHECK(tok.pad() == -1);
    CHECK(tok.eos() == -1);
}

TEST_CASE("char_vocabulary_of: the distinct characters by code point", "[tokenizer][char]") {
    CHECK(char_vocabulary_of("").empty());
    CHECK(char_vocabulary_of("banana") == Strings{"a", "b", "n"});
    CHECK(char_vocabulary_of("日é a\n😀é日") == Strings{"\n", " ", "a", "é", "日", "😀"});
    CHECK(char_vocabulary_of(std::string("a\0b", 3)) == Strings{std::string(1, '\0'), "a", "b"});
    CHECK(contains(error_of([] { char_vocabulary_of("abc\xFF"); }), "offset 3"));

    // A vocabulary built from a text encodes that text and decodes it back.
    const std::string corpus = "First Citizen:\nBefore we proceed any further, hear me speak. Ça va? 日本 😀\n";
    const CharTokenizer tok = build(char_writer(char_vocabulary_of(corpus), /*with_unk=*/false));
    const Ids ids = tok.encode(corpus, false);
    CHECK(ids.size() == 73);  // characters, as Python counts them
    CHECK(tok.decode(ids) == corpus);
}
