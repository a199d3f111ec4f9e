#include "formats/tokenizer/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/tokenizer/unicode_category.h"
#include "formats/tokenizer/utf8.h"

namespace kiln {

namespace {

constexpr std::string_view kComponent = "tokenizer";

struct CategoryClass {
    std::string_view name;   // as written in a pattern
    uint32_t marker;         // the collapsed unit of the category's non-ASCII members
    std::string_view ascii;  // its ASCII members, as class items
};

// The five classes llama.cpp rewrites. The ASCII sets are Unicode's
// categories of those characters, except that '~' (Sm) is missing from the
// symbols, as in llama.cpp, whose results kiln reproduces.
constexpr CategoryClass kCategoryClasses[] = {
    {"\\p{N}", 0xD1, "0-9"},
    {"\\p{L}", 0xD2, "A-Za-z"},
    {"\\p{P}", 0xD3, "!-#%-*,-/:;?@\\[-\\]_\\{\\}"},
    {"\\p{M}", 0xD4, ""},
    {"\\p{S}", 0xD5, "\\$\\+<->\\^`\\|"},
};

const CategoryClass* category_class_at(std::string_view pattern, size_t at) noexcept {
    for (const CategoryClass& c : kCategoryClasses)
        if (pattern.substr(at, c.name.size()) == c.name) return &c;
    return nullptr;
}

bool names_category(std::string_view pattern) noexcept {
    for (const CategoryClass& c : kCategoryClasses)
        if (pattern.find(c.name) != std::string_view::npos) return true;
    return false;
}

// The pattern in code units for the collapsed text: each \p{X} becomes its
// marker and ASCII members, bracketed unless it already stands in a class.
std::u32string collapse_pattern(std::string_view pattern) {
    std::u32string out;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        const bool escaped = i > 0 && pattern[i - 1] == '\\';
        if (c == '[' && !escaped) in_class = true;
        else if (c == ']' && in_class && !escaped) in_class = false;
        else if (const CategoryClass* cls = c == '\\' ? category_class_at(pattern, i) : nullptr) {
            if (!in_class) out.push_back(U'[');
            out.push_back(cls->marker);
            for (const char a : cls->ascii) out.push_back(static_cast<uint8_t>(a));
            if (!in_class) out.push_back(U']');
            i += cls->name.size() - 1;
            continue;
        }
        if (static_cast<uint8_t>(c) >= 0x80)
            fail(kComponent, "pre-tokenizer pattern '{}' mixes \\p{{..}} classes with non-ASCII characters, which "
                 "cannot run on the collapsed text", printable(pattern));
        out.push_back(static_cast<uint8_t>(c));
    }
    return out;
}

// The pattern's code points (it is valid UTF-8: kiln's own tables).
std::u32string decode_pattern(std::string_view pattern) {
    std::u32string out;
    for (size_t at = 0; at < pattern.size();) {
        const Utf8Scan scan = utf8_scan(pattern.substr(at));
        if (scan.status != Utf8Status::complete)
            fail(kComponent, "pre-tokenizer pattern '{}' is not valid UTF-8", printable(pattern));
        out.push_back(utf8_code_point(pattern.substr(at), scan.length));
        at += scan.length;
    }
    return out;
}

// A match context per thread with a JIT stack that can grow large: patterns
// such as tekken's repeat a group once per letter, so a long word needs a
// deep stack (PCRE2's default of 32 KiB fails at a few thousand letters).
// The stack's memory is reserved, and pages are used only as it grows.
struct MatchContext {
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    MatchContext() {
        context = pcre2_match_context_create(nullptr);
        stack = pcre2_jit_stack_create(32 * 1024, 256 * 1024 * 1024, nullptr);
        if (context == nullptr || stack == nullptr) fail(kComponent, "out of memory for a PCRE2 match context");
        pcre2_jit_stack_assign(context, nullptr, stack);
        // The default of 10 million steps could stop a linear-time match of a very long word.
        pcre2_set_match_limit(context, 0xFFFFFFFFu);
    }
    ~MatchContext() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
    }
    MatchContext(const MatchContext&) = delete;
    MatchContext& operator=(const MatchContext&) = delete;
};

pcre2_match_context* thread_match_context() {
    thread_local MatchContext context;
    return context.context;
}

}  // namespace

uint32_t collapsed_unit(char32_t code_point) noexcept {
    if (code_point < 0x80) return code_point;
    switch (char_category(code_point)) {
        case CharCategory::whitespace: return 0x0B;
        case CharCategory::number: return 0xD1;
        case CharCategory::letter: return 0xD2;
        case CharCategory::punctuation: return 0xD3;
        case CharCategory::mark: return 0xD4;
        case CharCategory::symbol: return 0xD5;
        case CharCategory::other: break;
    }
    return 0xD0;
}

uint32_t folded_unit(char32_t code_point) noexcept {
    if (code_point >= 0x80 && char_category(code_point) == CharCategory::whitespace) return 0x0B;
    return code_point;
}

struct PretokenizerRegex::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

PretokenizerRegex::PretokenizerRegex(std::string_view pattern) : pattern_(pattern) {
    collapsed_ = names_category(pattern);
    const std::u32string units = collapsed_ ? collapse_pattern(pattern) : decode_pattern(pattern);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    compiled_ = std::make_unique<Compiled>();
    // No PCRE2_UTF: code units are plain numbers (markers, lone surrogates);
    // \s is then ASCII whitespace only, as for std::regex.
    compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(units.data()), units.size(),
                                    PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
    if (compiled_->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, 256);
        std::string text;
        for (const PCRE2_UCHAR* p = message; *p != 0; ++p) text.push_back(static_cast<char>(*p));
        fail(kComponent, "pre-tokenizer pattern '{}' does not compile: {} at {}", printable(pattern), text,
             error_offset);
    }
    pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // a speed-up only: matching works without it
}

PretokenizerRegex::~PretokenizerRegex() = default;
PretokenizerRegex::PretokenizerRegex(PretokenizerRegex&&) noexcept = default;
PretokenizerRegex& PretokenizerRegex::operator=(PretokenizerRegex&&) noexcept = default;

void PretokenizerRegex::split(std::span<const uint32_t> units, std::span<const size_t> chunks,
                              std::vector<size_t>& out) const {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
    if (match == nullptr) fail(kComponent, "out of memory matching a pre-tokenizer pattern");
    pcre2_match_context* context = thread_match_context();
    size_t chunk_start = 0;
    for (const size_t length : chunks) {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(units.data() + chunk_start);
        size_t taken = 0;  // the end of the last match, relative to the chunk
        for (size_t from = 0; from < length;) {
            const int rc = pcre2_match(compiled_->code, subject, length, from, 0, match, context);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                pcre2_match_data_free(match);
                fail(kComponent, "matching pre-tokenizer pattern '{}' on a piece of {} characters failed (PCRE2 "
                     "error {})", printable(pattern_), length, rc);
            }
            const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
            const size_t begin = ovector[0], end = ovector[1];
            if (end == begin) {  // none of the tables' patterns matches empty text; step over it regardless
                from = begin + 1;
                continue;
            }
            if (begin > taken) out.push_back(begin - taken);
            out.push_back(end - begin);
            taken = from = end;
        }
        if (taken < length) out.push_back(length - taken);
        chunk_start += length;
    }
    pcre2_match_data_free(match);
}

}  // namespace kiln
