#include "formats/tokenizer/bpe_pretokenizer.h"

#include <algorithm>
#include <span>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/tokenizer/gpt2_pretokenizer.h"
#include "formats/tokenizer/llama3_pretokenizer.h"

namespace kiln {

namespace {

constexpr std::string_view kComponent = "tokenizer";

// The two patterns llama.cpp runs by hand-written code; kiln does the same
// (gpt2_pretokenizer.h, llama3_pretokenizer.h), so these strings select them.
constexpr std::string_view kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr std::string_view kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Llama 3's with single digits.
constexpr std::string_view kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Words with their leading space, up to whitespace or sentence punctuation.
constexpr std::string_view kBloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kDeepseek3 =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct PreType {
    std::vector<std::string_view> names;
    std::vector<std::string_view> patterns;
    bool clean_spaces = true;
    bool ignore_merges = false;
    bool add_bos = false;
    bool no_bos = false;
};

// llama.cpp's table (llama_vocab::impl::load and llm_tokenizer_bpe), one
// entry per distinct behaviour.
const std::vector<PreType>& pre_types() {
    static const std::vector<PreType> types = {
        {{"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3}, true, true, true},
        {{"dbrx", "smaug-bpe"}, {kLlama3}},
        {{"chatglm-bpe"}, {kLlama3}, true, false, false, true},
        {{"deepseek-llm"},
         {"[\r\n]", kDeepseekLetters, R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", "[一-龥ࠀ-一가-퟿]+",
          R"re(\p{N}+)re"},
         false},
        {{"deepseek-v3"}, {R"re(\p{N}{1,3})re", "[一-龥぀-ゟ゠-ヿ]+", kDeepseek3}, false},
        {{"deepseek-coder"}, {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", "[一-龥ࠀ-一가-퟿]+", R"re(\p{N})re"},
         false},
        {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, "[0-9][0-9][0-9]"}},
        {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {R"re(\p{N})re", kGpt2}},
        {{"command-r", "smollm"}, {R"re(\p{N})re", kGpt2}, false},
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code",
          "roberta-bpe", "mpt", "olmo", "jais"},
         {kGpt2}},
        {{"qwen2", "deepseek-r1-qwen"}, {kQwen2}, false},
        {{"stablelm2", "megrez"}, {kQwen2}},
        {{"poro-chat"}, {kBloom}, false},
        {{"bloom", "gpt3-finnish"}, {kBloom}},
        {{"viking"}, {kBloom, R"re(\p{N})re"}, false},
        {{"tekken"}, {kTekken}, false, true, true},
        {{"chameleon"},
         {R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re", R"re(([\t\n]|    |  ))re",
          R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
         false, false, true},
    };
    return types;
}

void append_utf8(std::string& out, char32_t cp) {
    // Any value up to U+10FFFF, surrogates included: they came from the text.
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace

std::u32string llama_code_points(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const auto continuation = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
    for (size_t at = 0; at < text.size();) {
        const uint8_t lead = byte(at);
        char32_t cp = 0xFFFD;
        size_t length = 1;
        if (lead < 0x80) {
            cp = lead;
        } else if ((lead & 0xE0) == 0xC0) {
            if (continuation(at + 1)) cp = (lead & 0x1F) << 6 | (byte(at + 1) & 0x3F), length = 2;
        } else if ((lead & 0xF0) == 0xE0) {
            if (continuation(at + 1) && continuation(at + 2))
                cp = (lead & 0x0F) << 12 | (byte(at + 1) & 0x3F) << 6 | (byte(at + 2) & 0x3F), length = 3;
        } else if ((lead & 0xF8) == 0xF0) {
            if (continuation(at + 1) && continuation(at + 2) && continuation(at + 3))
                cp = (lead & 0x07) << 18 | (byte(at + 1) & 0x3F) << 12 | (byte(at + 2) & 0x3F) << 6 |
                     (byte(at + 3) & 0x3F),
                length = 4;
            if (cp > 0x10FFFF) cp = 0xFFFD;
        }
        // else a continuation byte or F8..FF: not a lead, one U+FFFD
        out.push_back(cp);
        at += length;
    }
    return out;
}

BpePretokenizer::BpePretokenizer(std::string_view pre, std::string_view file_name) {
    name_ = pre.empty() ? "default" : std::string(pre);
    const PreType* found = nullptr;
    for (const PreType& type : pre_types())
        if (std::find(type.names.begin(), type.names.end(), name_) != type.names.end()) found = &type;
    if (found == nullptr)
        fail(kComponent, "{}: tokenizer.ggml.pre is '{}', a pre-tokenizer kiln does not know", file_name,
             printable(name_));
    for (const std::string_view pattern : found->patterns) {
        if (pattern == kGpt2) steps_.push_back({Splitter::gpt2, std::nullopt});
        else if (pattern == kLlama3) steps_.push_back({Splitter::llama3, std::nullopt});
        else {
            steps_.push_back({Splitter::regex, PretokenizerRegex(pattern)});
        }
    }
    clean_spaces_ = found->clean_spaces;
    ignore_merges_ = found->ignore_merges;
    add_bos_default_ = found->add_bos;
    bos_default_none_ = found->no_bos;
}

std::vector<std::string_view> BpePretokenizer::known_names() {
    std::vector<std::string_view> out;
    for (const PreType& type : pre_types()) out.insert(out.end(), type.names.begin(), type.names.end());
    return out;
}

std::vector<std::string> BpePretokenizer::split(std::string_view text) const {
    const std::u32string cps = llama_code_points(text);
    if (cps.empty()) return {};
    std::string read;  // the text as read, whose bytes the hand-written splitters see
    std::vector<size_t> byte_start(cps.size() + 1);
    read.reserve(text.size());
    for (size_t i = 0; i < cps.size(); ++i) {
        byte_start[i] = read.size();
        append_utf8(read, cps[i]);
    }
    byte_start[cps.size()] = read.size();

    std::vector<uint32_t> collapsed, folded;
    std::vector<size_t> chunks{cps.size()}, next;  // piece lengths in code points
    for (const Step& step : steps_) {
        next.clear();
        if (step.splitter == Splitter::regex) {
            std::vector<uint32_t>& units = step.regex->collapsed() ? collapsed : folded;
            if (units.empty()) {
                units.reserve(cps.size());
                for (const char32_t cp : cps)
                    units.push_back(step.regex->collapsed() ? collapsed_unit(cp) : folded_unit(cp));
            }
            step.regex->split(units, chunks, next);
        } else {
            size_t first = 0;  // the chunk's first code point
            for (const size_t length : chunks) {
                const size_t begin = byte_start[first], end = byte_start[first + length];
                const std::string_view chunk = std::string_view(read).substr(begin, end - begin);
                size_t cp_at = first;
                for (size_t at = 0; at < chunk.size();) {
                    const size_t stop = step.splitter == Splitter::gpt2 ? gpt2_pretoken_end(chunk, at)
                                                                        : llama3_pretoken_end(chunk, at);
                    // Splitters end pieces on character boundaries of the text as read.
                    const size_t cp_end = static_cast<size_t>(
                        std::lower_bound(byte_start.begin() + cp_at, byte_start.begin() + first + length + 1,
                                         begin + stop) -
                        byte_start.begin());
                    next.push_back(cp_end - cp_at);
                    cp_at = cp_end;
                    at = byte_start[cp_end] - begin;
                }
                first += length;
            }
        }
        chunks.swap(next);
    }

    std::vector<std::string> words;
    words.reserve(chunks.size());
    size_t first = 0;
    for (const size_t length : chunks) {
        words.emplace_back(read.substr(byte_start[first], byte_start[first + length] - byte_start[first]));
        first += length;
    }
    return words;
}

}  // namespace kiln
