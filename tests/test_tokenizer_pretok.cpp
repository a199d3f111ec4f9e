// Pre-tokenizers by tokenizer.ggml.pre, special tokens in text, end of
// generation and llama.cpp's defaults for optional vocabulary keys.
//
// Three sources of expected ids:
//   * llama.cpp's own test vectors (models/ggml-vocab-*.gguf with .inp/.out),
//     read from the checkout that KILN_LLAMA_CPP_DIR names (skipped without it);
//   * tests/fixtures/tokenizer_pretok/llama_tokenize.txt: llama.cpp's
//     llama-tokenize on GPT-2's vocabulary with `pre` changed, for the pre
//     types that have no vocabulary file there (tests/reference/
//     make_pretok_fixtures.py writes it);
//   * small hand-made vocabularies below, checked by hand.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/bpe_pretokenizer.h"
#include "formats/tokenizer/gpt2_tokenizer.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"
#include "support/paths.h"

using namespace kiln;

namespace {

using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

Ids parse_ids(std::string_view line) {
    Ids ids;
    std::istringstream in{std::string(line)};
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
}

// llama.cpp's test-tokenizer-0 format: inputs separated by
// "\n__ggml_vocab_test__\n", one line of ids per input.
std::vector<std::pair<std::string, Ids>> read_vectors(const std::filesystem::path& inp, const std::filesystem::path& out) {
    const std::string raw = read_file(inp);
    const std::string separator = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < raw.size();) {
        const size_t next = raw.find(separator, pos);
        if (next == std::string::npos) {
            inputs.push_back(raw.substr(pos));
            break;
        }
        inputs.push_back(raw.substr(pos, next - pos));
        pos = next + separator.size();
    }
    std::vector<std::string> lines;
    std::istringstream in(read_file(out));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    REQUIRE(inputs.size() == lines.size());
    std::vector<std::pair<std::string, Ids>> cases;
    for (size_t i = 0; i < inputs.size(); ++i) cases.emplace_back(inputs[i], parse_ids(lines[i]));
    return cases;
}

std::string utf8(char32_t cp) {
    std::string out;
    utf8_append(out, cp);
    return out;
}

// A byte-level BPE vocabulary: the 256 byte characters (so a byte's id is its
// value), then `extra` tokens
// (in the byte-level alphabet) with their types, and `merges`.
GgufWriter bpe_writer(std::string_view pre, const std::vector<std::pair<std::string, TokenType>>& extra,
                      const std::vector<std::string>& merges) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(utf8(Gpt2Tokenizer::byte_char(static_cast<uint8_t>(b))));
        types.push_back(static_cast<int32_t>(TokenType::normal));
    }
    for (const auto& [text, type] : extra) {
        tokens.push_back(text);
        types.push_back(static_cast<int32_t>(type));
    }
    GgufWriter w;
    w.set("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.set("tokenizer.ggml.pre", std::string(pre));
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, tokens));
    w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, types));
    w.set("tokenizer.ggml.merges", gguf_array<std::string>(GgufType::STRING, merges));
    return w;
}

std::unique_ptr<Tokenizer> load(const GgufWriter& w) {
    const std::vector<std::byte> bytes = w.to_bytes();
    return load_tokenizer(GgufFile::parse(bytes, "vocab.gguf"));
}

std::string load_error(const GgufWriter& w) {
    try {
        load(w);
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("the vocabulary was accepted");
    return {};
}

// The fixtures' escapes: \\ \n \t \r and \xNN.
std::string unescape(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 == s.size()) {
            out.push_back(s[i]);
            continue;
        }
        const char c = s[++i];
        if (c == 'n') out.push_back('\n');
        else if (c == 't') out.push_back('\t');
        else if (c == 'r') out.push_back('\r');
        else if (c == 'x') {
            out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
            i += 2;
        } else out.push_back(c);
    }
    return out;
}

// Splits a line at its tabs.
std::vector<std::string_view> fields(std::string_view line) {
    std::vector<std::string_view> out;
    for (size_t at = 0;;) {
        const size_t tab = line.find('\t', at);
        out.push_back(line.substr(at, tab == std::string_view::npos ? std::string_view::npos : tab - at));
        if (tab == std::string_view::npos) return out;
        at = tab + 1;
    }
}

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then `pieces`.
GgufWriter spm_writer(const std::vector<std::pair<std::string, TokenType>>& pieces, bool with_ids) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    std::vector<float> scores = {0, 0, 0};
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(fmt::format("<0x{:02X}>", b));
        types.push_back(6);
        scores.push_back(0);
    }
    float score = -1;
    for (const auto& [text, type] : pieces) {
        tokens.push_back(text);
        types.push_back(static_cast<int32_t>(type));
        scores.push_back(score--);
    }
    GgufWriter w;
    w.set("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, tokens));
    w.set("tokenizer.ggml.scores", gguf_array<float>(GgufType::FLOAT32, scores));
    w.set("tokenizer.ggml.token_type", gguf_array<int32_t>(GgufType::INT32, types));
    if (with_ids) {
        w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
        w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
        w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    }
    return w;
}

}  // namespace

TEST_CASE("pretok: llama.cpp's test vectors for every vocabulary in its models folder", "[pretok]") {
    const char* root = std::getenv("KILN_LLAMA_CPP_DIR");
    if (root == nullptr || *root == '\0') {
        WARN("SKIPPED: set KILN_LLAMA_CPP_DIR to a llama.cpp checkout to run its tokenizer test vectors");
        return;
    }
    const std::filesystem::path models = std::filesystem::path(root) / "models";
    REQUIRE(std::filesystem::is_directory(models));
    std::vector<std::filesystem::path> vocabs;
    for (const auto& entry : std::filesystem::directory_iterator(models)) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with("ggml-vocab-") && name.ends_with(".gguf")) vocabs.push_back(entry.path());
    }
    std::sort(vocabs.begin(), vocabs.end());
    REQUIRE_FALSE(vocabs.empty());
    size_t files = 0, refused = 0;
    for (const std::filesystem::path& vocab : vocabs) {
        const std::filesystem::path inp = vocab.string() + ".inp", out = vocab.string() + ".out";
        if (!std::filesystem::exists(inp) || !std::filesystem::exists(out)) continue;
        ++files;
        const GgufFile file = GgufFile::open(vocab);
        std::unique_ptr<Tokenizer> tokenizer;
        try {
            tokenizer = load_tokenizer(file);
        } catch (const Error& e) {
            // Only the vocabulary types kiln does not implement may be refused.
            const std::string message = e.what();
            INFO(message);
            CHECK((contains(message, "'bert'") || contains(message, "'t5'") || contains(message, "'rwkv'")));
            WARN(fmt::format("{}: refused: {}", vocab.filename().string(), message));
            ++refused;
            continue;
        }
        const auto cases = read_vectors(inp, out);
        size_t passed = 0;
        for (const auto& [text, expected] : cases) {
            const Ids got = tokenizer->encode(text, EncodeOptions{.add_bos = false, .add_eos = false,
                                                                   .parse_special = false});
            if (got == expected) {
                ++passed;
            } else {
                INFO(vocab.filename().string() << ": '" << text << "'");
                CHECK(got == expected);
            }
        }
        WARN(fmt::format("{}: {}/{} passed", vocab.filename().string(), passed, cases.size()));
        CHECK(passed == cases.size());
    }
    WARN(fmt::format("{} vocabularies with test vectors, {} refused", files, refused));
}

TEST_CASE("pretok: llama-tokenize's ids for pre types without a vocabulary of their own", "[pretok]") {
    // Each line: pre<TAB>text (C escapes)<TAB>ids, from make_pretok_fixtures.py.
    const std::filesystem::path fixture = test::fixtures_dir() / "tokenizer_pretok" / "llama_tokenize.txt";
    const std::filesystem::path base = test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf";
    REQUIRE(std::filesystem::exists(fixture));
    REQUIRE(std::filesystem::exists(base));
    const GgufFile gpt2 = GgufFile::open(base);
    std::map<std::string, std::unique_ptr<Tokenizer>> by_pre;
    const auto tokenizer_for = [&](const std::string& pre) -> const Tokenizer& {
        auto& slot = by_pre[pre];
        if (!slot) {
            GgufWriter w;
            for (const GgufEntry& entry : gpt2.metadata())
                if (entry.key != "tokenizer.ggml.pre") w.set(entry.key, entry.value);
            w.set("tokenizer.ggml.pre", pre);
            slot = load(w);
        }
        return *slot;
    };
    std::istringstream in(read_file(fixture));
    std::map<std::string, std::pair<size_t, size_t>> counts;  // pre -> (passed, total)
    size_t total = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::vector<std::string_view> f = fields(line);
        REQUIRE(f.size() == 3);
        const std::string pre(f[0]);
        const std::string text = unescape(f[1]);
        const Ids expected = parse_ids(f[2]);
        const Ids got = tokenizer_for(pre).encode(text, EncodeOptions{.parse_special = true});
        INFO(pre << ": '" << text << "'");
        CHECK(got == expected);
        auto& [passed, count] = counts[pre];
        passed += got == expected;
        ++count;
        ++total;
    }
    CHECK(total > 0);
    for (const auto& [pre, c] : counts) WARN(fmt::format("{}: {}/{} passed", pre, c.first, c.second));
}

TEST_CASE("pretok: llama-tokenize's ids on llama.cpp's vocabularies, special tokens parsed and not", "[pretok]") {
    const char* root = std::getenv("KILN_LLAMA_CPP_DIR");
    if (root == nullptr || *root == '\0') {
        WARN("SKIPPED: set KILN_LLAMA_CPP_DIR to a llama.cpp checkout to compare with llama-tokenize on its vocabularies");
        return;
    }
    // Each line: file<TAB>special|literal<TAB>text<TAB>ids, from make_pretok_fixtures.py.
    const std::filesystem::path fixture = test::fixtures_dir() / "tokenizer_pretok" / "llama_cpp_models.txt";
    REQUIRE(std::filesystem::exists(fixture));
    std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
    std::map<std::string, std::pair<size_t, size_t>> counts;  // file -> (passed, total)
    std::istringstream in(read_file(fixture));
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::vector<std::string_view> f = fields(line);
        REQUIRE(f.size() == 4);
        const std::string name(f[0]);
        auto& tokenizer = tokenizers[name];
        if (!tokenizer) tokenizer = load_tokenizer(GgufFile::open(std::filesystem::path(root) / "models" / name));
        const std::string text = unescape(f[2]);
        const Ids got = tokenizer->encode(text, EncodeOptions{.parse_special = f[1] == "special"});
        const Ids expected = parse_ids(f[3]);
        INFO(name << " " << f[1] << ": '" << text << "'");
        CHECK(got == expected);
        auto& [passed, total] = counts[name];
        passed += got == expected;
        ++total;
    }
    CHECK_FALSE(counts.empty());
    for (const auto& [name, c] : counts) WARN(fmt::format("{}: {}/{} passed", name, c.first, c.second));
}

TEST_CASE("pretok: llama3 groups digits by three, qwen2 splits them one by one", "[pretok]") {
    CHECK(BpePretokenizer("llama3", "t").split("12345") == Words{"123", "45"});
    CHECK(BpePretokenizer("llama-bpe", "t").split("a 1234567") == Words{"a", " ", "123", "456", "7"});
    CHECK(BpePretokenizer("qwen2", "t").split("12345") == Words{"1", "2", "3", "4", "5"});
    CHECK(BpePretokenizer("gpt-2", "t").split("12345") == Words{"12345"});
    // GPT-2's contractions are lower case only; Llama 3's either case.
    CHECK(BpePretokenizer("gpt-2", "t").split("I'LL") == Words{"I", "'", "LL"});
    CHECK(BpePretokenizer("llama3", "t").split("I'LL") == Words{"I", "'LL"});
    // Llama 3 keeps line breaks with the punctuation before them.
    CHECK(BpePretokenizer("llama3", "t").split("hi!\n\nyou") == Words{"hi", "!\n\n", "you"});
    // default: punctuation first, then GPT-2's rule, then digits in threes.
    CHECK(BpePretokenizer("", "t").split("ab,12345") == Words{"ab", ",", "123", "45"});
    // Invalid UTF-8 reads as U+FFFD, one per byte.
    CHECK(BpePretokenizer("gpt-2", "t").split("a\xFF\xFE") == Words{"a", "\xEF\xBF\xBD\xEF\xBF\xBD"});

    // Through the tokenizer: a vocabulary with "123" and "45" built by merges.
    const GgufWriter w = bpe_writer("llama3", {{"12", TokenType::normal}, {"123", TokenType::normal},
                                               {"45", TokenType::normal}}, {"1 2", "12 3", "4 5"});
    const auto tok = load(w);
    CHECK(tok->encode("12345", false) == Ids{257, 258});
    CHECK(tok->add_bos() == true);  // llama3 asks for BOS unless the file says otherwise
    const auto qwen = load(bpe_writer("qwen2", {{"12", TokenType::normal}}, {"1 2"}));
    CHECK(qwen->encode("12", false) == Ids{'1', '2'});
}

TEST_CASE("pretok: every pre-tokenizer llama.cpp names is known, and an unknown one is refused", "[pretok]") {
    for (const std::string_view name : BpePretokenizer::known_names()) {
        INFO(name);
        const BpePretokenizer pre(name, "t");
        // Every pre-tokenizer keeps every byte of valid text.
        const std::string text = "Hello, World! 1234 'll  \t\n\n 你好 🦙 ★ ~ é";
        std::string joined;
        for (const std::string& w : pre.split(text)) joined += w;
        CHECK(joined == text);
    }
    const std::string message = load_error(bpe_writer("gpt-5o", {}, {}));
    CHECK(contains(message, "tokenizer.ggml.pre is 'gpt-5o'"));
    CHECK(contains(message, "does not know"));
    // jina-v2's rules name <mask>: without it llama.cpp refuses the vocabulary, and so does kiln.
    CHECK(contains(load_error(bpe_writer("jina-v2-es", {}, {})), "'<mask>'"));
    const auto jina = load(bpe_writer("jina-v2-es", {{"<mask>", TokenType::control}}, {}));
    // <mask> eats the whitespace before it.
    CHECK(jina->encode("a  <mask>", false) == Ids{'a', 256});
}

TEST_CASE("pretok: long runs of one character class split without running out of stack", "[pretok]") {
    // tekken's pattern repeats a group once per letter: PCRE2's default JIT
    // stack would give up after a few thousand.
    for (const std::string_view name : BpePretokenizer::known_names()) {
        const BpePretokenizer pre(name, "t");
        for (const std::string unit : {"a", "A", "1", " ", "\n", "!", "日"}) {
            std::string text;
            for (int i = 0; i < 100000; ++i) text += unit;
            INFO(name << " '" << unit << "'");
            std::string joined;
            for (const std::string& w : pre.split(text)) joined += w;
            CHECK(joined == text);
        }
    }
}

TEST_CASE("pretok: special tokens in text become their ids unless parse_special is off", "[pretok]") {
    const auto tok = load(bpe_writer("gpt-2", {{"<|im_start|>", TokenType::control}, {"<|im_end|>", TokenType::control},
                                               {"<tool>", TokenType::user_defined}}, {}));
    const int32_t im_start = 256, im_end = 257, tool = 258;
    CHECK(tok->encode("<|im_start|>a<|im_end|>", false) == Ids{im_start, 'a', im_end});
    CHECK(tok->encode("a<|im_end|><|im_end|>b", false) == Ids{'a', im_end, im_end, 'b'});
    const Ids literal = tok->encode("a<|im_end|>", EncodeOptions{.parse_special = false});
    CHECK(std::find(literal.begin(), literal.end(), im_end) == literal.end());
    CHECK(literal.size() == 11);
    // User-defined tokens are cut out of the text either way (llama.cpp's rule).
    CHECK(tok->encode("x<tool>y", EncodeOptions{.parse_special = false}) == Ids{'x', tool, 'y'});
    CHECK(tok->encode("x<tool>y", false) == Ids{'x', tool, 'y'});
    // Longest first: "<|im_end|>" wins over a shorter token inside it.
    const auto nested = load(bpe_writer("gpt-2", {{"<|im_end|>", TokenType::control}, {"im", TokenType::user_defined}},
                                        {}));
    CHECK(nested->encode("<|im_end|>im", false) == Ids{256, 257});

    // SentencePiece: the space prefix goes in front of text after a special token too.
    const auto spm = load(spm_writer({{"\xE2\x96\x81" "a", TokenType::normal}, {"<|end|>", TokenType::user_defined}},
                                     true));
    const int32_t a = 259, end = 260;
    CHECK(spm->encode("a<|end|>a", false) == Ids{a, end, a});
    CHECK(spm->encode("a<|end|>a", true) == Ids{1, a, end, a});
    CHECK(spm->encode("<s>a", false) == Ids{1, a});
    CHECK(spm->encode("<s>a", EncodeOptions{.parse_special = false}).front() != 1);
}

TEST_CASE("pretok: end of generation covers eos, eot, eom and the known end-of-turn texts", "[pretok]") {
    GgufWriter w = bpe_writer("qwen2", {{"<|im_end|>", TokenType::control}, {"<|endoftext|>", TokenType::normal},
                                        {"<|eom_id|>", TokenType::control}, {"<|im_start|>", TokenType::control},
                                        {"<eot>", TokenType::control}},
                              {});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{257});
    w.set("tokenizer.ggml.eot_token_id", uint32_t{260});
    const auto tok = load(w);
    CHECK(tok->is_eog(256));  // <|im_end|>
    CHECK(tok->is_eog(257));  // eos, <|endoftext|>
    CHECK(tok->is_eog(258));  // <|eom_id|>
    CHECK_FALSE(tok->is_eog(259));  // <|im_start|>
    CHECK(tok->is_eog(260));  // the eot key
    CHECK_FALSE(tok->is_eog('a'));
    CHECK_FALSE(tok->is_eog(-1));
    // An end-of-turn text is a control token whatever its type says: it decodes to nothing.
    CHECK(tok->piece(257).empty());

    // DeepSeek's end of sentence is the eot when no key names one.
    const auto deepseek = load(bpe_writer("deepseek-llm", {{"<｜end▁of▁sentence｜>", TokenType::control}}, {}));
    CHECK(deepseek->is_eog(256));
}

TEST_CASE("pretok: SentencePiece vocabularies without the optional ids load with llama.cpp's defaults", "[pretok]") {
    GgufWriter w = spm_writer({{"\xE2\x96\x81" "a", TokenType::normal}}, false);
    const auto tok = load(w);
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
    CHECK(dynamic_cast<const SpmTokenizer&>(*tok).unk() == 0);
    CHECK(tok->add_bos());
    CHECK_FALSE(tok->add_eos());
    CHECK(tok->is_eog(2));
    CHECK(tok->encode("a", tok->prompt_options()) == Ids{1, 259});

    w.set("tokenizer.ggml.add_eos_token", true);
    w.set("tokenizer.ggml.add_space_prefix", false);
    const auto with_eos = load(w);
    CHECK(with_eos->add_eos());
    CHECK_FALSE(with_eos->add_space_prefix());
    CHECK(with_eos->encode("a", with_eos->prompt_options()) == Ids{1, 'a' + 3, 2});
}

TEST_CASE("pretok: WordPiece, Unigram and RWKV vocabularies are refused by name", "[pretok]") {
    for (const std::string model : {"bert", "t5", "rwkv"}) {
        GgufWriter w;
        w.set("tokenizer.ggml.model", model);
        w.set("tokenizer.ggml.tokens", gguf_array<std::string>(GgufType::STRING, std::vector<std::string>{"a"}));
        const std::string message = load_error(w);
        INFO(message);
        CHECK(contains(message, "'" + model + "'"));
        CHECK(contains(message, "does not implement"));
    }
}
