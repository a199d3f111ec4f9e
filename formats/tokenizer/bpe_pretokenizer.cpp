#include "formats/tokenizer/bpe_pretokenizer.h"

#include <algorithm>
#include <span>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/tokenizer/gpt2_pretokenizer.h"
#include "formats/tokenizer/llama3_pretokenizer.h"
#include "formats/tokenizer/utf8.h"

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
// Cased letters of many scripts (DeepSeek's tokenizer.json), written as
// \x{..} escapes so that no editor's Unicode normalisation can change them
// (several are canonically equivalent to other code points).
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-)re"
    R"re(\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-)re"
    R"re(\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-)re"
    R"re(\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77})re"
    R"re(\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-)re"
    R"re(\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-)re"
    R"re(\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})re"
    R"re(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})re"
    R"re(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})re"
    R"re(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-)re"
    R"re(\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})re"
    R"re(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-)re"
    R"re(\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
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
        {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
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
        utf8_append(read, cps[i]);
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
