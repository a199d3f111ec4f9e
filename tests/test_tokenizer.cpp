// The SentencePiece-style tokenizer, UTF-8 streaming, and kiln-tokenize.
//
// The expected ids come from tests/reference/spm_reference.py, an independent
// (deliberately naive) implementation of the same algorithm, itself checked
// against ids the sentencepiece library published for the LLaMA vocabulary.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/token_fixture.h"

using namespace kiln;

namespace {

using Ids = std::vector<int32_t>;

std::filesystem::path llama_vocab_path() { return test::shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf"; }
std::filesystem::path stories_path() { return test::shared_models_dir() / "stories260K.gguf"; }

SpmTokenizer load(const std::filesystem::path& path) { return SpmTokenizer(GgufFile::open(path)); }

// ------------------------------------------------------------ fixtures

void check_fixture(const SpmTokenizer& tok, const std::string& name) {
    const std::vector<test::TokenCase> cases = test::read_token_fixture(name);
    REQUIRE(cases.size() >= 40);
    // The brief's categories must all be present (a fixture cut short would hide them).
    test::find_token_case(cases, "");
    test::find_token_case(cases, "   ");
    test::find_token_case(cases, "🦙 llamas 🎉👍🏽");
    test::find_token_case(cases, "ends with a cut character \xf0\x9f\xa6");
    for (const test::TokenCase& c : cases) {
        INFO(name << " line " << c.line << ": \"" << c.text << "\"");
        REQUIRE(!c.ids.empty());
        // In text that is not valid UTF-8 kiln cuts symbols as llama.cpp does,
        // not as sentencepiece does (the llama-tokenize fixtures of
        // test_tokenizer_pretok.cpp check those texts).
        if (!utf8_valid(c.text)) continue;
        CHECK(c.ids.front() == tok.bos());
        // sentencepiece takes "<s>" in a text literally: so does parse_special = false.
        CHECK(tok.encode(c.text, EncodeOptions{.add_bos = true, .parse_special = false}) == c.ids);
        const Ids without_bos(c.ids.begin() + 1, c.ids.end());
        CHECK(tok.encode(c.text, EncodeOptions{.parse_special = false}) == without_bos);
        // Round trip, with and without the BOS in front, spaces at the start included.
        CHECK(tok.decode(c.ids) == c.text);
        CHECK(tok.decode(without_bos) == c.text);
    }
}

// ------------------------------------------------------------ hand-made vocabularies

struct VocabSpec {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};

// <unk> <s> </s>, then the given tokens; `bytes` adds <0x00>..<0xFF> first.
VocabSpec make_spec(const std::vector<std::pair<std::string, float>>& pieces, bool bytes = true) {
    VocabSpec v;
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.scores = {0, 0, 0};
    v.types = {2, 3, 3};
    if (bytes) {
        for (int b = 0; b < 256; ++b) {
            v.tokens.push_back(fmt::format("<0x{:02X}>", b));
            v.scores.push_back(0);
            v.types.push_back(6);
        }
    }
    for (const auto& [text, score] : pieces) {
        v.tokens.push_back(text);
        v.scores.push_back(score);
        v.types.push_back(1);
    }
    return v;
}

GgufWriter make_writer(const VocabSpec& v, bool space_prefix = false) {
    GgufWriter w;
    w.set("general.architecture", "llama");
    w.set("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, v.tokens));
    w.set("tokenizer.ggml.scores", gguf_array<float>(GgufType::FLOAT32, v.scores));
    w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, v.types));
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
    w.set("tokenizer.ggml.add_space_prefix", space_prefix);
    return w;
}

SpmTokenizer build(const GgufWriter& w) {
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile file = GgufFile::parse(bytes, "vocab.gguf");
    return SpmTokenizer(file);  // copies what it needs: the bytes may go
}

int32_t id_of(const SpmTokenizer& tok, std::string_view text) {
    for (size_t i = 0; i < tok.vocab_size(); ++i)
        if (tok.token_text(static_cast<int32_t>(i)) == text) return static_cast<int32_t>(i);
    FAIL("no token '" << text << "'");
    return -1;
}

// The error a tokenizer built from `w` throws; fails the test if none.
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

// ------------------------------------------------------------ running kiln-tokenize

using test::shell_quote;

test::ToolRun kiln_tokenize(const std::string& args) {
    const auto exe = test::tool_path("kiln-tokenize");
    INFO("build the tools first (cmake --build BUILD --target kiln-tokenize): " << exe.string());
    REQUIRE(std::filesystem::exists(exe));
    return test::run_tool("kiln-tokenize", args);
}

void require_one_line_error(const test::ToolRun& run, int status) {
    INFO("stderr: " << run.err);
    CHECK(run.status == status);
    CHECK(run.out.empty());
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.rfind("kiln-tokenize: ", 0) == 0);
}

}  // namespace

// ============================================================ real vocabularies

TEST_CASE("SPM: published ids of the LLaMA and stories260K vocabularies", "[tokenizer]") {
    const SpmTokenizer llama = load(llama_vocab_path());
    CHECK(llama.vocab_size() == 32000);
    CHECK(llama.bos() == 1);
    CHECK(llama.eos() == 2);
    CHECK(llama.unk() == 0);
    CHECK(llama.add_bos());
    CHECK(llama.add_space_prefix());
    CHECK(llama.encode("Hello world", true) == Ids{1, 15043, 3186});
    CHECK(llama.encode("Hello world", false) == Ids{15043, 3186});
    CHECK(llama.token_text(15043) == "\xE2\x96\x81Hello");

    const SpmTokenizer stories = load(stories_path());
    CHECK(stories.vocab_size() == 512);
    CHECK(stories.encode("Once upon a time", true) == Ids{1, 403, 407, 261, 378});
    CHECK(stories.decode(Ids{1, 403, 407, 261, 378}) == "Once upon a time");
}

TEST_CASE("SPM: every reference string gives the reference ids and decodes back", "[tokenizer]") {
    SECTION("LLaMA, 32000 tokens") { check_fixture(load(llama_vocab_path()), "llama-spm.txt"); }
    SECTION("stories260K, 512 tokens (mostly byte fallback beyond ASCII)") {
        check_fixture(load(stories_path()), "stories260K.txt");
    }
}

TEST_CASE("SPM: empty text and texts that are only spaces", "[tokenizer]") {
    const SpmTokenizer tok = load(llama_vocab_path());
    CHECK(tok.encode("", true) == Ids{1});
    CHECK(tok.encode("", false).empty());
    CHECK(tok.decode(Ids{}).empty());
    CHECK(tok.decode(Ids{1}).empty());
    // The prefix space plus the text's own: " " is "▁▁" (259), "   " is "▁▁▁▁" (268).
    CHECK(tok.encode(" ", false) == Ids{259});
    CHECK(tok.encode("   ", false) == Ids{268});
    CHECK(tok.decode(Ids{259}) == " ");
    CHECK(tok.decode(Ids{268}) == "   ");
}

TEST_CASE("SPM: pieces and decoding", "[tokenizer]") {
    const SpmTokenizer tok = load(llama_vocab_path());
    CHECK(tok.piece(15043) == " Hello");          // "▁" is a space
    CHECK(tok.piece(13) == "\n");                 // <0x0A>
    CHECK(tok.piece(243) == "\xF0");              // <0xF0>: one raw byte
    CHECK(tok.piece(1).empty());                  // <s>
    CHECK(tok.piece(2).empty());                  // </s>
    CHECK(tok.piece(0) == "\xE2\x96\x85");        // <unk> as llama.cpp shows it
    CHECK(tok.token_type(1) == TokenType::control);
    CHECK(tok.token_type(13) == TokenType::byte);
    CHECK(tok.token_type(15043) == TokenType::normal);
    CHECK(tok.token_score(259) == -1e9f);

    // From the start of a text the prefix space goes; a continuation keeps it.
    CHECK(tok.decode(Ids{15043, 3186}) == "Hello world");
    CHECK(tok.decode(Ids{1, 15043, 3186}) == "Hello world");
    CHECK(tok.decode(Ids{3186}, false) == " world");
    CHECK(tok.decode(Ids{1, 15043}, false) == " Hello");
    // Only one space is dropped, and only from the first piece.
    CHECK(tok.decode(Ids{29871, 15043}) == " Hello");
    CHECK(tok.decode(Ids{13, 15043}) == "\n Hello");

    CHECK_THROWS_AS(tok.decode(Ids{15043, 32000}), Error);
    CHECK_THROWS_AS(tok.decode(Ids{-1}), Error);
    CHECK_THROWS_AS(tok.piece(32000), Error);
    CHECK_THROWS_AS(tok.token_text(-5), Error);
    try {
        tok.decode(Ids{40000});
        FAIL("no error for an id outside the vocabulary");
    } catch (const Error& e) {
        CHECK(contains(e.what(), "40000"));
        CHECK(contains(e.what(), "31999"));
    }
}

TEST_CASE("SPM: streamed pieces through Utf8Stream rebuild the text, whole characters only", "[tokenizer]") {
    const std::string text = "Hello 🦙 日本語のテキスト, café 🎉👍🏽 한국어";
    for (const auto& path : {llama_vocab_path(), stories_path()}) {
        INFO(path.string());
        const SpmTokenizer tok = load(path);
        const Ids ids = tok.encode(text, false);
        Utf8Stream stream;
        std::string streamed;
        for (const int32_t id : ids) {
            const std::string chunk = stream.feed(tok.piece(id));
            CHECK(utf8_valid(chunk));
            streamed += chunk;
        }
        streamed += stream.flush();
        CHECK(streamed == " " + text);  // pieces keep the prefix space; decode() drops it
        CHECK(tok.decode(ids) == text);
    }
}

TEST_CASE("SPM: random text, valid UTF-8 or not, decodes back to itself", "[tokenizer]") {
    // Spaces, runs of spaces, ASCII, multi-byte characters, and raw bytes that
    // are often invalid UTF-8, mixed at random (fixed seed: reproducible).
    const std::vector<std::string> parts = {" ", "  ", "\n", "\t", "a", "e", "the", "Hello", ".", "é", "日本", "🦙",
                                            "👍🏽", "ж", "\xC3", "\x80", "\xF0\x9F", "\xFF", "\xED\xA0\x80"};
    std::mt19937 rng(2024);
    for (const auto& path : {llama_vocab_path(), stories_path()}) {
        const SpmTokenizer tok = load(path);
        for (int round = 0; round < 300; ++round) {
            std::string text;
            const int count = static_cast<int>(rng() % 40);
            for (int i = 0; i < count; ++i) text += parts[rng() % parts.size()];
            INFO(path.filename().string() << ": \"" << text << "\"");
            const Ids ids = tok.encode(text, true);
            // Broken UTF-8 may swallow the "▁" after it into byte tokens (llama.cpp's rule).
            if (utf8_valid(text)) REQUIRE(tok.decode(ids) == text);
        }
    }
}

TEST_CASE("SPM: 1 MB of text encodes and decodes back", "[tokenizer]") {
    std::ifstream in(std::filesystem::path(KILN_SHARED_DIR) / "data" / "tinyshakespeare.txt", std::ios::binary);
    REQUIRE(in);
    std::ostringstream text;
    text << in.rdbuf();
    const SpmTokenizer tok = load(llama_vocab_path());
    const Ids ids = tok.encode(text.str(), true);
    // The count kiln gave when every line of the text matched spm_reference.py
    // and the word-by-word and whole-text merge paths gave identical ids.
    CHECK(ids.size() == 368634);
    CHECK(tok.decode(ids) == text.str());
}

// ============================================================ hand-made vocabularies

TEST_CASE("SPM: the highest score merges first, the leftmost pair on a tie", "[tokenizer]") {
    SECTION("a tie: the leftmost pair wins") {
        const SpmTokenizer tok =
            build(make_writer(make_spec({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -5}})));
        CHECK(tok.encode("abc", false) == Ids{id_of(tok, "ab"), id_of(tok, "c")});
    }
    SECTION("a higher score beats position") {
        const SpmTokenizer tok =
            build(make_writer(make_spec({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -4}})));
        CHECK(tok.encode("abc", false) == Ids{id_of(tok, "a"), id_of(tok, "bc")});
    }
    SECTION("merges build on merges, across what was merged before") {
        // "bc" first, then "abc" from "a" + "bc", although "ab" alone is a piece too.
        const SpmTokenizer tok = build(
            make_writer(make_spec({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -6}, {"bc", -2}, {"abc", -3}})));
        CHECK(tok.encode("abcab", false) == Ids{id_of(tok, "abc"), id_of(tok, "ab")});
    }
}

TEST_CASE("SPM: byte fallback, unknown tokens and tokens that are never merged", "[tokenizer]") {
    SECTION("characters outside the vocabulary become their bytes") {
        const SpmTokenizer tok = build(make_writer(make_spec({{"a", -1}})));
        CHECK(tok.encode("aé", false) == Ids{id_of(tok, "a"), id_of(tok, "<0xC3>"), id_of(tok, "<0xA9>")});
        // A lead byte takes the bytes its length announces, as llama.cpp cuts them.
        CHECK(tok.encode("\xff" "a", false) == Ids{id_of(tok, "<0xFF>"), id_of(tok, "<0x61>")});
        CHECK(tok.encode("\x80" "a", false) == Ids{id_of(tok, "<0x80>"), id_of(tok, "a")});
    }
    SECTION("without byte tokens, an unknown character is one <unk>") {
        const SpmTokenizer tok = build(make_writer(make_spec({{"a", -1}}, /*bytes=*/false)));
        CHECK(tok.encode("aéa", false) == Ids{id_of(tok, "a"), 0, id_of(tok, "a")});
        CHECK(tok.decode(Ids{0}) == "\xE2\x96\x85");
    }
    SECTION("control and byte tokens are never assembled from text") {
        // "<s" + ">" would spell the control token <s>, and "<0x41" + ">" the
        // byte token <0x41>: both must stay out of reach of merges.
        const SpmTokenizer tok = build(make_writer(make_spec(
            {{"<", -1}, {"s", -1}, {">", -1}, {"<s", -2}, {"<0", -1}, {"<0x", -1}, {"<0x4", -1}, {"<0x41", -1}})));
        const EncodeOptions literal{.parse_special = false};
        CHECK(tok.encode("<s>", literal) == Ids{id_of(tok, "<s"), id_of(tok, ">")});
        CHECK(tok.encode("<0x41>", literal) == Ids{id_of(tok, "<0x41"), id_of(tok, ">")});
        CHECK(tok.decode(tok.encode("<s><0x41>", literal)) == "<s><0x41>");
        // With parse_special (the default) the control token's spelling is the control token.
        CHECK(tok.encode("<s>", false) == Ids{1});
    }
    SECTION("a text listed twice keeps its first id") {
        const SpmTokenizer tok = build(make_writer(make_spec({{"a", -1}, {"a", -2}})));
        CHECK(tok.encode("a", false) == Ids{259});
    }
}

TEST_CASE("SPM: the space prefix and word splitting", "[tokenizer]") {
    const std::string mark = "\xE2\x96\x81";
    SECTION("add_space_prefix false: no prefix, nothing dropped when decoding") {
        const SpmTokenizer tok = build(make_writer(make_spec({{"a", -1}, {mark, -1}, {mark + "a", -2}})));
        CHECK_FALSE(tok.add_space_prefix());
        CHECK(tok.encode("a a", false) == Ids{id_of(tok, "a"), id_of(tok, mark + "a")});
        CHECK(tok.decode(tok.encode(" a", false)) == " a");
    }
    SECTION("add_space_prefix true") {
        const SpmTokenizer tok = build(make_writer(make_spec({{"a", -1}, {mark, -1}, {mark + "a", -2}}), true));
        CHECK(tok.encode("a a", false) == Ids{id_of(tok, mark + "a"), id_of(tok, mark + "a")});
        CHECK(tok.decode(tok.encode("a a", false)) == "a a");
    }
    SECTION("a piece with a space inside is merged across words") {
        // Such a piece turns off the word-by-word shortcut; the result must not change.
        const SpmTokenizer tok = build(make_writer(
            make_spec({{"a", -1}, {"b", -1}, {mark, -1}, {"a" + mark, -3}, {"a" + mark + "b", -2}})));
        CHECK(tok.encode("a b a", false) == Ids{id_of(tok, "a" + mark + "b"), id_of(tok, mark), id_of(tok, "a")});
    }
}

TEST_CASE("SPM: vocabularies that cannot be read give a tokenizer error naming the key", "[tokenizer]") {
    const VocabSpec good = make_spec({{"a", -1}});

    SECTION("a GGUF file without a vocabulary") {
        GgufWriter w;
        w.set("general.architecture", "llama");
        CHECK(contains(build_error(w), "tokenizer.ggml.model"));
    }
    SECTION("another tokenizer model") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.model", "gpt2");
        CHECK(contains(build_error(w), "'gpt2'"));
        CHECK_THROWS_AS(load(test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf"), Error);
    }
    SECTION("the model name is not a string") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.model", uint32_t{1});
        CHECK(contains(build_error(w), "tokenizer.ggml.model"));
    }
    SECTION("scores of the wrong type") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.scores", gguf_array<std::string>(GgufType::STRING, good.tokens));
        CHECK(contains(build_error(w), "tokenizer.ggml.scores"));
    }
    SECTION("tokens that are not an array") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.tokens", "abc");
        CHECK(contains(build_error(w), "tokenizer.ggml.tokens"));
    }
    SECTION("arrays of different lengths") {
        VocabSpec v = good;
        v.types.pop_back();
        CHECK(contains(build_error(make_writer(v)), "tokenizer.ggml.token_type"));
    }
    SECTION("a token type outside 1..6") {
        VocabSpec v = good;
        v.types.back() = 9;
        CHECK(contains(build_error(make_writer(v)), "tokenizer.ggml.token_type["));
    }
    SECTION("a NaN score") {
        VocabSpec v = good;
        v.scores.back() = std::numeric_limits<float>::quiet_NaN();
        CHECK(contains(build_error(make_writer(v)), "NaN"));
    }
    SECTION("a byte token whose text is not <0xNN>") {
        VocabSpec v = good;
        v.tokens[10] = "<0xZZ>";
        CHECK(contains(build_error(make_writer(v)), "<0xNN>"));
    }
    SECTION("a missing special token id takes llama.cpp's default") {
        GgufWriter w;
        w.set("tokenizer.ggml.model", "llama");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, good.tokens));
        w.set("tokenizer.ggml.scores", gguf_array<float>(GgufType::FLOAT32, good.scores));
        w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, good.types));
        w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
        w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
        CHECK(build(w).eos() == 2);
    }
    SECTION("a special token id outside the vocabulary") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.bos_token_id", uint32_t{4294967295u});
        CHECK(contains(build_error(w), "tokenizer.ggml.bos_token_id"));
    }
    SECTION("add_bos_token that is not a bool") {
        GgufWriter w = make_writer(good);
        w.set("tokenizer.ggml.add_bos_token", "yes");
        CHECK(contains(build_error(w), "tokenizer.ggml.add_bos_token"));
    }
}

// ============================================================ UTF-8

TEST_CASE("utf8_scan: lengths, cut characters and invalid bytes", "[tokenizer]") {
    const auto scan = [](std::string_view s) { return utf8_scan(s); };
    const auto is = [&](std::string_view s, Utf8Status status, size_t length) {
        const Utf8Scan r = scan(s);
        return r.status == status && r.length == length;
    };
    CHECK(is("a", Utf8Status::complete, 1));
    CHECK(is("é", Utf8Status::complete, 2));
    CHECK(is("日", Utf8Status::complete, 3));
    CHECK(is("🦙", Utf8Status::complete, 4));
    CHECK(is("\xF4\x8F\xBF\xBF", Utf8Status::complete, 4));  // U+10FFFF, the last code point
    CHECK(is("\xE0\xA0\x80", Utf8Status::complete, 3));      // U+0800, the first 3-byte one
    CHECK(is("\xF0\x9F\xA6", Utf8Status::incomplete, 3));
    CHECK(is("\xE6", Utf8Status::incomplete, 1));
    CHECK(is("\x80", Utf8Status::invalid, 1));               // a continuation byte alone
    CHECK(is("\xC0\xAF", Utf8Status::invalid, 1));           // overlong "/"
    CHECK(is("\xE0\x9F\xBF", Utf8Status::invalid, 1));       // overlong 3-byte form
    CHECK(is("\xED\xA0\x80", Utf8Status::invalid, 1));       // a UTF-16 surrogate
    CHECK(is("\xF4\x90\x80\x80", Utf8Status::invalid, 1));   // above U+10FFFF
    CHECK(is("\xF5\x80", Utf8Status::invalid, 1));
    CHECK(is("\xE2\x82(", Utf8Status::invalid, 2));          // cut by an ASCII byte: both bytes
    CHECK(utf8_valid("héllo 🦙"));
    CHECK_FALSE(utf8_valid("h\xC3llo"));
}

TEST_CASE("Utf8Stream never emits part of a character", "[tokenizer]") {
    const std::string text = "🦙 llamas 🎉👍🏽 日本語のテキスト 한국어 café";
    SECTION("fed one byte at a time") {
        Utf8Stream stream;
        std::string out;
        for (const char c : text) {
            const std::string chunk = stream.feed(std::string_view(&c, 1));
            CHECK(utf8_valid(chunk));
            CHECK(stream.pending() < 4);
            out += chunk;
        }
        CHECK(stream.pending() == 0);
        CHECK(stream.flush().empty());
        CHECK(out == text);
    }
    SECTION("fed in chunks that cut characters anywhere") {
        for (size_t size = 1; size <= 7; ++size) {
            Utf8Stream stream;
            std::string out;
            for (size_t at = 0; at < text.size(); at += size) {
                const std::string chunk = stream.feed(std::string_view(text).substr(at, size));
                CHECK(utf8_valid(chunk));
                out += chunk;
            }
            out += stream.flush();
            CHECK(out == text);
        }
    }
    SECTION("a cut character is held back until it is complete") {
        Utf8Stream stream;
        CHECK(stream.feed("a\xF0\x9F") == "a");
        CHECK(stream.pending() == 2);
        CHECK(stream.feed("\xA6").empty());
        CHECK(stream.feed("\x99!") == "🦙!");
    }
    SECTION("invalid bytes become U+FFFD, one per broken sequence") {
        const std::string r(kUtf8Replacement);
        Utf8Stream stream;
        CHECK(stream.feed("\x80x") == r + "x");
        CHECK(stream.feed("\xE2\x82(") == r + "(");
        CHECK(stream.feed("\xED\xA0\x80") == r + r + r);
        CHECK(stream.feed("ok\xF0\x9F\xA6") == "ok");
        CHECK(stream.flush() == r);  // a character the stream ended inside of
        CHECK(stream.pending() == 0);
        CHECK(stream.flush().empty());
    }
}

// ============================================================ kiln-tokenize

TEST_CASE("kiln-tokenize prints the ids of a prompt", "[tokenizer][cli]") {
    const std::string model = shell_quote(stories_path().string());
    SECTION("ids on one line") {
        const test::ToolRun run = kiln_tokenize("-m " + model + " -p 'Once upon a time'");
        INFO(run.err);
        CHECK(run.status == 0);
        CHECK(run.out == "1 403 407 261 378\n");
        CHECK(run.err.empty());
    }
    SECTION("--no-bos and --show-pieces") {
        const test::ToolRun run = kiln_tokenize("-m " + model + " -p 'Once upon' --no-bos --show-pieces");
        CHECK(run.status == 0);
        CHECK(run.out == "403\t\xE2\x96\x81Once\n407\t\xE2\x96\x81upon\n");
    }
    SECTION("text from a file, with bytes that are not UTF-8") {
        test::TempDir dir;
        const auto path = dir.path() / "prompt.txt";
        std::ofstream(path, std::ios::binary) << "Once upon a time\xFF";
        const test::ToolRun run = kiln_tokenize("-m " + model + " -f " + shell_quote(path.string()));
        CHECK(run.status == 0);
        CHECK(run.out == "1 403 407 261 378 258\n");  // 258 is <0xFF>
    }
    SECTION("a GPT-2 vocabulary: no BOS unless the vocabulary asks for one") {
        const auto gpt2 = shell_quote((test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf").string());
        const test::ToolRun run = kiln_tokenize("-m " + gpt2 + " -p 'Hello world'");
        INFO(run.err);
        CHECK(run.status == 0);
        CHECK(run.out == "15496 995\n");  // GPT-2's published ids
        const test::ToolRun pieces = kiln_tokenize("-m " + gpt2 + " -p 'Hello world' --show-pieces");
        CHECK(pieces.out == "15496\tHello\n995\t\xC4\xA0world\n");
        // A special token written in the text is the token, unless --no-special.
        CHECK(kiln_tokenize("-m " + gpt2 + " -p 'Hi<|endoftext|>'").out == "17250 50256\n");
        const test::ToolRun literal = kiln_tokenize("-m " + gpt2 + " -p 'Hi<|endoftext|>' --no-special");
        CHECK(literal.status == 0);
        CHECK(literal.out.find("50256") == std::string::npos);
    }
    SECTION("a character vocabulary") {
        test::TempDir dir;
        const auto path = dir.path() / "chars.gguf";
        GgufWriter w;
        w.set("tokenizer.ggml.model", "char");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"<s>", "a", "b", "\n"}));
        w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, {3, 1, 1, 1}));
        w.set("tokenizer.ggml.bos_token_id", uint32_t{0});
        w.set("tokenizer.ggml.add_bos_token", true);
        w.write(path);
        // "<s>" in a text is characters, and '<' is not one of the vocabulary's.
        CHECK(kiln_tokenize("-m " + shell_quote(path.string()) + " -p 'ab<s>'").status == 1);
        const test::ToolRun ok = kiln_tokenize("-m " + shell_quote(path.string()) + " -p abba");
        CHECK(ok.status == 0);
        CHECK(ok.out == "0 1 2 2 1\n");
        CHECK(kiln_tokenize("-m " + shell_quote(path.string()) + " -p abba --no-bos").out == "1 2 2 1\n");
    }
    SECTION("--help") {
        const test::ToolRun run = kiln_tokenize("--help");
        CHECK(run.status == 0);
        CHECK(contains(run.out, "usage: kiln-tokenize"));
    }
}

TEST_CASE("kiln-tokenize reports errors on one line", "[tokenizer][cli]") {
    SECTION("a missing model: status 1") {
        const test::ToolRun run = kiln_tokenize("-m /nonexistent/model.gguf -p hello");
        require_one_line_error(run, 1);
        CHECK(contains(run.err, "/nonexistent/model.gguf"));
    }
    SECTION("a model with a tokenizer kiln does not know: status 1") {
        test::TempDir dir;
        const auto path = dir.path() / "bert.gguf";
        GgufWriter w;
        w.set("tokenizer.ggml.model", "bert");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"a"}));
        w.write(path);
        const test::ToolRun run = kiln_tokenize("-m " + shell_quote(path.string()) + " -p hello");
        require_one_line_error(run, 1);
        CHECK(contains(run.err, "'bert'"));
        CHECK(contains(run.err, "'gpt2'"));
    }
    SECTION("text a character vocabulary cannot encode: status 1") {
        test::TempDir dir;
        const auto path = dir.path() / "chars.gguf";
        GgufWriter w;
        w.set("tokenizer.ggml.model", "char");
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, {"a", "b"}));
        w.write(path);
        const test::ToolRun run = kiln_tokenize("-m " + shell_quote(path.string()) + " -p abc");
        require_one_line_error(run, 1);
        CHECK(contains(run.err, "U+0063"));
    }
    SECTION("usage errors: status 2") {
        require_one_line_error(kiln_tokenize("-p hello"), 2);
        require_one_line_error(kiln_tokenize("-m x.gguf"), 2);
        require_one_line_error(kiln_tokenize("-m x.gguf -p a -f b"), 2);
        require_one_line_error(kiln_tokenize("-m x.gguf -p a --bogus"), 2);
        require_one_line_error(kiln_tokenize("-m x.gguf -p"), 2);
    }
}
