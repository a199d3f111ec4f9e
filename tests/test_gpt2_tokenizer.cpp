// GPT-2's byte-level BPE tokenizer and its pre-tokenizer.
//
// The expected ids and pre-token splits come from
// tests/reference/gpt2_bpe_reference.py, an independent Python implementation
// of OpenAI's published encoder.py (with the `regex` module for the split),
// itself checked against GPT-2's published ids for "Hello world".
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/bpe_pretokenizer.h"
#include "formats/tokenizer/gpt2_pretokenizer.h"
#include "formats/tokenizer/gpt2_tokenizer.h"
#include "formats/tokenizer/unicode_class.h"
#include "formats/tokenizer/utf8.h"
#include "support/paths.h"
#include "support/token_fixture.h"

using namespace kiln;

namespace {

using Ids = std::vector<int32_t>;

std::filesystem::path gpt2_vocab_path() { return test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf"; }

Gpt2Tokenizer load(const std::filesystem::path& path) { return Gpt2Tokenizer(GgufFile::open(path)); }

const Gpt2Tokenizer& gpt2() {
    static const Gpt2Tokenizer tok = load(gpt2_vocab_path());
    return tok;
}

std::string read_text(const std::filesystem::path& path, size_t limit) {
    std::ifstream in(path, std::ios::binary);
    INFO(path.string());
    REQUIRE(in);
    std::string text(limit, '\0');
    in.read(text.data(), static_cast<std::streamsize>(limit));
    text.resize(static_cast<size_t>(in.gcount()));
    return text;
}

std::string utf8(char32_t cp) {
    std::string out;
    utf8_append(out, cp);
    return out;
}

// A small gpt2 vocabulary: the 256 byte characters, then `merged`; merges as given.
GgufWriter tiny_writer(const std::vector<std::string>& merged, const std::vector<std::string>& merges) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(utf8(Gpt2Tokenizer::byte_char(static_cast<uint8_t>(b))));
    tokens.insert(tokens.end(), merged.begin(), merged.end());
    GgufWriter w;
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "gpt-2");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, tokens));
    w.set("tokenizer.ggml.merges", gguf_array<std::string>(GgufType::STRING, merges));
    return w;
}

Gpt2Tokenizer build(const GgufWriter& w) {
    const std::vector<std::byte> bytes = w.to_bytes();
    return Gpt2Tokenizer(GgufFile::parse(bytes, "vocab.gguf"));
}

std::string build_error(const GgufWriter& w) {
    try {
        build(w);
    } catch (const Error& e) {
        CHECK(e.component() == "tokenizer");
        return e.what();
    }
    FAIL("the tokenizer accepted a bad vocabulary");
    return {};
}

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

std::string concatenated_pieces(const Gpt2Tokenizer& tok, const Ids& ids) {
    std::string out;
    for (const int32_t id : ids) out += tok.piece(id);
    return out;
}

}  // namespace

TEST_CASE("GPT-2: the published vocabulary and its special token", "[tokenizer][gpt2]") {
    const Gpt2Tokenizer& tok = gpt2();
    CHECK(tok.vocab_size() == 50257);
    CHECK(tok.merge_count() == 50000);
    CHECK(tok.bos() == 50256);
    CHECK(tok.eos() == 50256);
    CHECK(tok.pad() == -1);
    CHECK_FALSE(tok.add_bos());
    CHECK_FALSE(tok.add_space_prefix());
    CHECK(tok.token_text(50256) == "<|endoftext|>");
    CHECK(tok.token_type(50256) == TokenType::control);
    CHECK(tok.piece(50256).empty());  // a control token is not text
    CHECK(tok.encode("Hello world", false) == Ids{15496, 995});
    CHECK(tok.encode("Hello world", true) == Ids{50256, 15496, 995});
    CHECK(tok.encode("", true) == Ids{50256});
    CHECK(tok.encode("", false).empty());
    // The special token's spelling is the special token, unless parse_special is off.
    CHECK(tok.encode("<|endoftext|>", false) == Ids{50256});
    const Ids literal = tok.encode("<|endoftext|>", EncodeOptions{.parse_special = false});
    CHECK(literal.size() > 1);
    CHECK(std::find(literal.begin(), literal.end(), 50256) == literal.end());
    CHECK(tok.decode(literal) == "<|endoftext|>");
    CHECK(tok.decode(Ids{50256, 15496, 50256}) == "Hello");
    CHECK(tok.token_text(995) == "\xC4\xA0world");  // "Ġworld"
    CHECK(tok.piece(995) == " world");
    CHECK(tok.piece(198) == "\n");
    CHECK_THROWS_AS(tok.decode(Ids{50257}), Error);
    CHECK_THROWS_AS(tok.piece(-1), Error);
    CHECK_THROWS_AS(tok.token_text(60000), Error);
}

TEST_CASE("GPT-2: every reference string gives the reference ids and decodes back", "[tokenizer][gpt2]") {
    const Gpt2Tokenizer& tok = gpt2();
    const std::vector<test::TokenCase> cases = test::read_token_fixture("gpt2.txt");
    REQUIRE(cases.size() >= 90);
    // The brief's categories must all be present (a fixture cut short would hide them).
    test::find_token_case(cases, "");
    test::find_token_case(cases, "mixed \t \n whitespace \r\n runs");
    test::find_token_case(cases, "IT'S, DON'T, WE'LL, YOU'VE, I'M, SHE'D, THEY'RE");
    test::find_token_case(cases, "family: 👨‍👩‍👧‍👦 and flag 🏳️‍🌈 and 🇫🇷");
    test::find_token_case(cases, "ends with a cut character \xf0\x9f\xa6");
    // encoder.py's ids take the text literally and keep invalid UTF-8 bytes;
    // kiln follows llama.cpp, which reads each invalid byte as U+FFFD, so
    // those texts must give the ids of the text as llama.cpp reads it.
    const EncodeOptions literal{.parse_special = false};
    for (const test::TokenCase& c : cases) {
        INFO("gpt2.txt line " << c.line << ": \"" << c.text << "\"");
        if (!utf8_valid(c.text)) {
            const std::u32string read = llama_code_points(c.text);
            std::string replaced;
            for (const char32_t cp : read) utf8_append(replaced, cp);
            CHECK(tok.encode(c.text, literal) == tok.encode(replaced, literal));
            continue;
        }
        CHECK(tok.encode(c.text, literal) == c.ids);
        CHECK(tok.decode(c.ids) == c.text);
        CHECK(concatenated_pieces(tok, c.ids) == c.text);
    }
}

TEST_CASE("GPT-2: the reference ids of 64 KiB of Tiny Shakespeare", "[tokenizer][gpt2]") {
    const std::string text = read_text(test::shared_dir() / "data" / "tinyshakespeare.txt", 65536);
    REQUIRE(text.size() == 65536);
    std::ifstream in(test::fixtures_dir() / "tokenizer" / "gpt2_tinyshakespeare.txt");
    REQUIRE(in);
    Ids expected;
    for (int32_t id; in >> id;) expected.push_back(id);
    REQUIRE(expected.size() > 10000);
    const Ids ids = gpt2().encode(text, false);
    REQUIRE(ids.size() == expected.size());
    for (size_t i = 0; i < ids.size(); ++i) {
        INFO("id " << i);
        REQUIRE(ids[i] == expected[i]);
    }
    CHECK(gpt2().decode(ids) == text);
}

TEST_CASE("GPT-2: the pre-tokenizer cuts where the regex pattern does", "[tokenizer][gpt2]") {
    const std::vector<test::TokenCase> cases = test::read_token_fixture("gpt2_pretokens.txt");
    REQUIRE(cases.size() >= 90);
    for (const test::TokenCase& c : cases) {
        INFO("gpt2_pretokens.txt line " << c.line << ": \"" << c.text << "\"");
        Ids lengths;
        for (size_t at = 0; at < c.text.size();) {
            const size_t end = gpt2_pretoken_end(c.text, at);
            REQUIRE(end > at);
            REQUIRE(end <= c.text.size());
            lengths.push_back(static_cast<int32_t>(end - at));
            at = end;
        }
        CHECK(lengths == c.ids);
    }
}

TEST_CASE("GPT-2: merge order on a hand-made vocabulary", "[tokenizer][gpt2]") {
    // Lower ranks first, every occurrence of a pair before the pairs it makes,
    // a repeated pair at its later rank: see gpt2_bpe_reference.py.
    const Gpt2Tokenizer tok = load(test::fixtures_dir() / "tokenizer" / "gpt2_tiny.gguf");
    CHECK(tok.vocab_size() == 265);
    CHECK(tok.merge_count() == 9);
    const std::vector<test::TokenCase> cases = test::read_token_fixture("gpt2_tiny.txt");
    REQUIRE(cases.size() >= 10);
    test::find_token_case(cases, "abab");
    test::find_token_case(cases, "cde");
    for (const test::TokenCase& c : cases) {
        INFO("gpt2_tiny.txt line " << c.line << ": \"" << c.text << "\"");
        CHECK(tok.encode(c.text, EncodeOptions{.parse_special = false}) == c.ids);
        CHECK(tok.decode(c.ids) == c.text);
    }
}

TEST_CASE("GPT-2: random bytes decode back to themselves as llama.cpp reads them", "[tokenizer][gpt2]") {
    const Gpt2Tokenizer& tok = gpt2();
    std::mt19937 rng(7);
    const std::vector<std::string> pool = {"a", "Z", " ", "  ", "\t", "\n", "'", "'s", "9", ".", "é", "日", "😀",
                                           "\xE2\x80\x8D", "\xFF", "\xC3", "\x80", "\xF0\x9F", "\u00A0", "\u3000"};
    for (int round = 0; round < 300; ++round) {
        std::string text;
        const int length = static_cast<int>(rng() % 40);
        for (int i = 0; i < length; ++i) text += pool[rng() % pool.size()];
        INFO("text: " << text);
        const Ids ids = tok.encode(text, false);
        // Invalid bytes come back as U+FFFD, one per byte (llama.cpp's reading).
        std::string read;
        for (const char32_t cp : llama_code_points(text)) utf8_append(read, cp);
        CHECK(tok.decode(ids) == read);
        // Streaming the pieces gives whole characters only, and the same text when valid.
        Utf8Stream stream;
        std::string streamed;
        for (const int32_t id : ids) streamed += stream.feed(tok.piece(id));
        streamed += stream.flush();
        CHECK(utf8_valid(streamed));
        if (utf8_valid(text)) CHECK(streamed == text);
    }
}

TEST_CASE("GPT-2: long runs of one class are pre-tokens of their own", "[tokenizer][gpt2]") {
    const Gpt2Tokenizer& tok = gpt2();
    for (const std::string& unit : {std::string("a"), std::string(" "), std::string("\n"), std::string("日")}) {
        std::string text;
        for (int i = 0; i < 20000; ++i) text += unit;
        INFO("unit '" << unit << "'");
        CHECK(tok.decode(tok.encode(text, false)) == text);
    }
}

TEST_CASE("GPT-2: the byte-level alphabet", "[tokenizer][gpt2]") {
    CHECK(Gpt2Tokenizer::byte_char('!') == U'!');
    CHECK(Gpt2Tokenizer::byte_char('~') == U'~');
    CHECK(Gpt2Tokenizer::byte_char(0xA1) == 0xA1);
    CHECK(Gpt2Tokenizer::byte_char(0xFF) == 0xFF);
    CHECK(Gpt2Tokenizer::byte_char(0x00) == 0x100);
    CHECK(Gpt2Tokenizer::byte_char('\n') == 0x10A);
    CHECK(Gpt2Tokenizer::byte_char(' ') == 0x120);   // "Ġ"
    CHECK(Gpt2Tokenizer::byte_char(0x7F) == 0x121);
    CHECK(Gpt2Tokenizer::byte_char(0xAD) == 0x143);  // the last of the 68 moved bytes
    std::set<char32_t> seen;
    for (int b = 0; b < 256; ++b) seen.insert(Gpt2Tokenizer::byte_char(static_cast<uint8_t>(b)));
    CHECK(seen.size() == 256);
}

TEST_CASE("GPT-2: Unicode classes of the pre-tokenizer", "[tokenizer][gpt2]") {
    CHECK(std::string(unicode_class_version()) == "14.0.0");
    CHECK(char_class(U'a') == CharClass::letter);
    CHECK(char_class(U'é') == CharClass::letter);
    CHECK(char_class(U'日') == CharClass::letter);
    CHECK(char_class(U'Я') == CharClass::letter);
    CHECK(char_class(U'7') == CharClass::number);
    CHECK(char_class(U'²') == CharClass::number);     // No
    CHECK(char_class(U'Ⅻ') == CharClass::number);     // Nl
    CHECK(char_class(0x0663) == CharClass::number);   // ARABIC-INDIC DIGIT THREE
    CHECK(char_class(U' ') == CharClass::whitespace);
    CHECK(char_class(0x0B) == CharClass::whitespace);
    CHECK(char_class(0x85) == CharClass::whitespace);
    CHECK(char_class(0xA0) == CharClass::whitespace);
    CHECK(char_class(0x3000) == CharClass::whitespace);
    CHECK(char_class(0x2029) == CharClass::whitespace);
    CHECK(char_class(0x1C) == CharClass::other);      // str.isspace() says yes, \s says no
    CHECK(char_class(0x200B) == CharClass::other);    // ZERO WIDTH SPACE is not White_Space
    CHECK(char_class(0x0301) == CharClass::other);    // a combining mark (Mn)
    CHECK(char_class(U'😀') == CharClass::other);
    CHECK(char_class(0x10FFFF) == CharClass::other);
    CHECK(char_class(0x110000) == CharClass::other);
    CHECK(char_class(0xD800) == CharClass::other);
}

TEST_CASE("GPT-2: vocabularies that cannot be read give a tokenizer error", "[tokenizer][gpt2]") {
    SECTION("another tokenizer model") {
        GgufWriter w = tiny_writer({}, {});
        w.set("tokenizer.ggml.model", "llama");
        CHECK(contains(build_error(w), "'llama'"));
    }
    SECTION("no merges") {
        GgufWriter w;
        w.set("tokenizer.ggml.model", "gpt2");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"a"}));
        CHECK(contains(build_error(w), "tokenizer.ggml.merges"));
    }
    SECTION("a merge that is not two tokens") {
        CHECK(contains(build_error(tiny_writer({"ab"}, {"ab"})), "tokenizer.ggml.merges[0]"));
        CHECK(contains(build_error(tiny_writer({"ab"}, {"a "})), "tokenizer.ggml.merges[0]"));
        CHECK(contains(build_error(tiny_writer({"ab"}, {""})), "tokenizer.ggml.merges[0]"));
    }
    SECTION("a merge whose result is not a token") {
        const std::string error = build_error(tiny_writer({"ab"}, {"a b", "b c"}));
        CHECK(contains(error, "tokenizer.ggml.merges[1]"));
        CHECK(contains(error, "'bc'"));
    }
    SECTION("a merge of a token that is not there") {
        CHECK(contains(build_error(tiny_writer({"ab", "abc"}, {"a b", "abc d"})), "'abc d'"));
    }
    SECTION("token types of another length") {
        GgufWriter w = tiny_writer({}, {});
        w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, {1, 1}));
        CHECK(contains(build_error(w), "tokenizer.ggml.token_type"));
    }
    SECTION("a special token id outside the vocabulary") {
        GgufWriter w = tiny_writer({}, {});
        w.set("tokenizer.ggml.eos_token_id", uint32_t{256});
        CHECK(contains(build_error(w), "tokenizer.ggml.eos_token_id"));
    }
    SECTION("add_bos_token without a BOS id") {
        // chatglm-bpe is the one pre-tokenizer without llama.cpp's default BOS (11).
        GgufWriter w = tiny_writer({}, {});
        w.set("tokenizer.ggml.pre", "chatglm-bpe");
        w.set("tokenizer.ggml.add_bos_token", true);
        CHECK(contains(build_error(w), "tokenizer.ggml.bos_token_id"));
    }
}

TEST_CASE("GPT-2: a vocabulary without a byte's character cannot encode that byte", "[tokenizer][gpt2]") {
    GgufWriter w;
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"a", "b", "ab"}));
    w.set("tokenizer.ggml.merges", gguf_array<std::string>(GgufType::STRING, {"a b"}));
    const Gpt2Tokenizer tok = build(w);
    CHECK(tok.encode("abba", false) == Ids{2, 1, 0});
    try {
        tok.encode("ab c", false);
        FAIL("no error for a byte without a token");
    } catch (const Error& e) {
        CHECK(e.component() == "tokenizer");
        CHECK(contains(e.what(), "0x20"));
        CHECK(contains(e.what(), "\xC4\xA0"));  // "Ġ"
    }
}
