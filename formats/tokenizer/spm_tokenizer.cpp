#include "formats/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/utf8.h"
#include "formats/tokenizer/vocab_metadata.h"

namespace kiln {

namespace {

using vocab::kComponent;
using vocab::is_integer_type;
using vocab::is_number_type;
using vocab::optional_bool;
using vocab::require_array;
using vocab::require_token_id;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";    // U+2581 "▁", SentencePiece's space
constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // U+2585 "▅", how llama.cpp shows <unk>

// FNV-1a: pieces are a few bytes long, where it beats the library's hash.
uint64_t hash_text(std::string_view text) noexcept {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const char c : text) {
        hash ^= static_cast<uint8_t>(c);
        hash *= 0x100000001b3ull;
    }
    return hash;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// The byte a "<0xNN>" token stands for, or -1 when the text has another form.
int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

SpmTokenizer::SpmTokenizer(const GgufFile& file) {
    const std::string model_name = vocab::model_name(file);
    if (model_name != "llama")
        fail(kComponent, "{}: tokenizer.ggml.model is '{}', but this tokenizer reads 'llama' (SentencePiece) "
             "vocabularies", file.name(), printable(model_name));

    tokens_ = vocab::require_tokens(file);
    const GgufArray& scores = require_array(file, "tokenizer.ggml.scores", "f32", is_number_type);
    const GgufArray& types = require_array(file, "tokenizer.ggml.token_type", "i32", is_integer_type);
    const size_t n = tokens_.size();
    if (scores.items.size() != n || types.items.size() != n)
        fail(kComponent, "{}: tokenizer.ggml.tokens has {} entries but tokenizer.ggml.scores has {} and "
             "tokenizer.ggml.token_type {} (expected the same length)", file.name(), n, scores.items.size(),
             types.items.size());

    scores_.reserve(n);
    types_.reserve(n);
    byte_value_.assign(n, -1);
    byte_tokens_.fill(-1);
    // At most half full, so probe runs stay short.
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;
    piece_table_.assign(capacity, PieceSlot{0, -1});
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);

        // The merge order compares scores; a NaN would break the queue's ordering.
        const double score = *scores.items[i].as_number();
        if (std::isnan(score)) fail(kComponent, "{}: tokenizer.ggml.scores[{}] is NaN", file.name(), i);
        scores_.push_back(static_cast<float>(score));

        const std::optional<int64_t> type = types.items[i].as_int();
        if (!type || *type < 1 || *type > 6)
            fail(kComponent, "{}: tokenizer.ggml.token_type[{}] is {} (expected 1 to 6: normal, unknown, control, "
                 "user-defined, unused, byte)", file.name(), i, type ? fmt::format("{}", *type) : "out of range");
        types_.push_back(static_cast<TokenType>(*type));

        switch (types_.back()) {
            case TokenType::normal:
            case TokenType::user_defined:
                add_piece(id);
                break;
            case TokenType::byte: {
                const int byte = parse_byte_token(tokens_[i]);
                if (byte < 0)
                    fail(kComponent, "{}: token {} has type byte but its text is '{}' (expected <0xNN>)",
                         file.name(), i, printable(tokens_[i]));
                byte_value_[i] = static_cast<int16_t>(byte);
                if (byte_tokens_[byte] < 0) byte_tokens_[byte] = id;
                break;
            }
            default:
                break;  // control, unknown and unused tokens are never produced by encoding
        }
    }

    // llama.cpp's defaults for SentencePiece vocabularies: <unk> 0, <s> 1, </s> 2.
    const auto id_or_default = [&](std::string_view key, int32_t fallback) {
        if (file.find(key) != nullptr) return require_token_id(file, key, n);
        return static_cast<size_t>(fallback) < n ? fallback : -1;
    };
    bos_ = id_or_default("tokenizer.ggml.bos_token_id", 1);
    eos_ = id_or_default("tokenizer.ggml.eos_token_id", 2);
    unk_ = id_or_default("tokenizer.ggml.unknown_token_id", 0);
    add_bos_ = optional_bool(file, "tokenizer.ggml.add_bos_token", true);
    add_eos_ = optional_bool(file, "tokenizer.ggml.add_eos_token", false);
    add_space_prefix_ = optional_bool(file, "tokenizer.ggml.add_space_prefix", true);
    special_ = read_special_tokens(file, tokens_, types_, eos_);
    types_ = special_.types;  // the piece table above keeps the file's types, as merges use them

    // Words can be merged one by one when no piece has a "▁" after another
    // character: then no piece, hence no merge, spans the start of a word.
    split_words_ = true;
    for (size_t i = 0; i < n; ++i) {
        if (types_[i] != TokenType::normal && types_[i] != TokenType::user_defined) continue;
        std::string_view text = tokens_[i];
        while (text.starts_with(kSpaceMark)) text.remove_prefix(kSpaceMark.size());
        if (text.find(kSpaceMark) != std::string_view::npos) split_words_ = false;
    }
}

void SpmTokenizer::add_piece(int32_t id) {
    const uint64_t hash = hash_text(tokens_[id]);
    const size_t mask = piece_table_.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
        PieceSlot& entry = piece_table_[slot];
        if (entry.id < 0) {
            entry = {static_cast<uint32_t>(hash >> 32), id};
            return;
        }
        if (tokens_[entry.id] == tokens_[id]) return;  // a text listed twice keeps its first id
    }
}

int32_t SpmTokenizer::piece_id(std::string_view text) const noexcept {
    const uint64_t hash = hash_text(text);
    const auto tag = static_cast<uint32_t>(hash >> 32);
    const size_t mask = piece_table_.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
        const PieceSlot& entry = piece_table_[slot];
        if (entry.id < 0) return -1;  // the table always has empty slots, so this ends
        if (entry.tag == tag && tokens_[entry.id] == text) return entry.id;
    }
}

void SpmTokenizer::append_symbol(std::string_view symbol, std::vector<int32_t>& out) const {
    if (const int32_t id = piece_id(symbol); id >= 0) {
        out.push_back(id);
        return;
    }
    // Byte fallback needs a token for every byte; a vocabulary without them
    // (sentencepiece's byte_fallback off) says "unknown" once per symbol.
    for (const char c : symbol) {
        if (byte_tokens_[static_cast<uint8_t>(c)] < 0) {
            if (unk_ >= 0) out.push_back(unk_);  // a vocabulary too small for llama.cpp's default <unk> drops it
            return;
        }
    }
    for (const char c : symbol) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
}

// A symbol is a span of the text being encoded. Merging only ever joins
// neighbours, so every symbol stays one contiguous span and a candidate pair
// can be looked up as a view of the text. A merged-away symbol has length 0.
struct SpmSymbol {
    uint32_t start;
    uint32_t length;
    int32_t prev;
    int32_t next;
};

// A pair that was a piece when it was queued. `length` is the pair's combined
// length then: if either side has grown since, the candidate is stale and is
// skipped (the merge that grew it queued the pair's new form).
struct SpmCandidate {
    float score;
    int32_t left;
    int32_t right;
    uint32_t length;
};

struct SpmTokenizer::Workspace {
    std::vector<SpmSymbol> symbols;
    std::vector<SpmCandidate> queue;  // a binary heap (std::push_heap / pop_heap)
};

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    std::vector<int32_t> out;
    if (options.add_bos && bos_ >= 0) out.push_back(bos_);
    Workspace work;
    bool after_special = true;  // the start of the text counts as "after a special token"
    for (const TextFragment& fragment : partition_special(text, special_, tokens_, options.parse_special)) {
        if (fragment.token >= 0) {
            out.push_back(fragment.token);
            after_special = true;
            continue;
        }
        encode_text(fragment.text, add_space_prefix_ && after_special, work, out);
        after_special = false;
    }
    if (options.add_eos && eos_ >= 0) out.push_back(eos_);
    return out;
}

void SpmTokenizer::encode_text(std::string_view text, bool space_prefix, Workspace& work,
                               std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::string normalized;
    normalized.reserve(text.size() + text.size() / 4 + kSpaceMark.size());
    if (space_prefix) normalized.append(kSpaceMark);
    for (const char c : text) {
        if (c == ' ') normalized.append(kSpaceMark);
        else normalized.push_back(c);
    }
    // Symbols are linked by int32 indices; beyond 2 GiB they would overflow.
    if (normalized.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(kComponent, "a text of {} bytes is too long to encode at once (the limit is 2 GiB); split it",
             text.size());
    out.reserve(out.size() + normalized.size() / 3);

    const std::string_view all = normalized;
    // Invalid UTF-8 may make a symbol straddle the start of a word (see encode_span).
    if (!split_words_ || !utf8_valid(all)) {
        encode_span(all, work, out);
        return;
    }
    // A word starts at a "▁" that follows another character. Every match of
    // "▁" is a character boundary: its first byte, E2, can only begin one.
    size_t begin = 0;
    for (size_t mark = all.find(kSpaceMark, 1); mark != std::string_view::npos;
         mark = all.find(kSpaceMark, mark + kSpaceMark.size())) {
        const size_t width = kSpaceMark.size();
        if (mark >= width && all.substr(mark - width, width) == kSpaceMark) continue;  // a run of spaces
        encode_span(all.substr(begin, mark - begin), work, out);
        begin = mark;
    }
    encode_span(all.substr(begin), work, out);
}

void SpmTokenizer::encode_span(std::string_view text, Workspace& work, std::vector<int32_t>& out) const {
    std::vector<SpmSymbol>& symbols = work.symbols;
    std::vector<SpmCandidate>& queue = work.queue;
    symbols.clear();
    queue.clear();

    for (size_t at = 0; at < text.size();) {
        // A symbol is as long as its first byte says (llama.cpp's rule, which
        // kiln's ids follow): valid UTF-8 gives its characters, and a broken
        // sequence takes the bytes after its lead whatever they are.
        const auto lead = static_cast<uint8_t>(text[at]);
        const size_t length = std::min<size_t>(lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4, text.size() - at);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(length), index - 1, index + 1});
        at += length;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    // The heap's top is the highest score; on a tie, the leftmost pair.
    // Symbol indices follow text order, so "leftmost" is "smallest left index".
    const auto lower_priority = [](const SpmCandidate& a, const SpmCandidate& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const uint32_t length = symbols[left].length + symbols[right].length;
        const int32_t id = piece_id(text.substr(symbols[left].start, length));
        if (id < 0) return;
        queue.push_back({scores_[id], left, right, length});
        std::push_heap(queue.begin(), queue.end(), lower_priority);
    };

    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);

    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end(), lower_priority);
        const SpmCandidate best = queue.back();
        queue.pop_back();
        SpmSymbol& left = symbols[best.left];
        if (left.length == 0 || left.next != best.right) continue;  // no longer neighbours
        SpmSymbol& right = symbols[best.right];
        if (left.length + right.length != best.length) continue;    // one side grew since

        // The right symbol joins the left one and leaves the list.
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = best.left;
        consider(left.prev, best.left);
        consider(best.left, left.next);
    }

    // Symbol 0 is never merged away (merges absorb the right side), so it heads the list.
    for (int32_t i = 0; i >= 0; i = symbols[i].next)
        append_symbol(text.substr(symbols[i].start, symbols[i].length), out);
}

void SpmTokenizer::check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
        fail(kComponent, "token id {} is outside the vocabulary (0 to {})", id, tokens_.size() - 1);
}

void SpmTokenizer::append_piece(int32_t id, std::string& out) const {
    check_id(id);
    switch (types_[id]) {
        case TokenType::normal:
        case TokenType::user_defined: {
            std::string_view text = tokens_[id];
            for (size_t mark; (mark = text.find(kSpaceMark)) != std::string_view::npos;) {
                out.append(text.substr(0, mark));
                out.push_back(' ');
                text.remove_prefix(mark + kSpaceMark.size());
            }
            out.append(text);
            break;
        }
        case TokenType::byte:
            out.push_back(static_cast<char>(byte_value_[id]));
            break;
        case TokenType::unknown:
            out.append(kUnknownPiece);
            break;
        case TokenType::control:
        case TokenType::unused:
            break;  // markers such as <s> and </s> are not text
    }
}

std::string SpmTokenizer::piece(int32_t id) const {
    std::string out;
    append_piece(id, out);
    return out;
}

std::string SpmTokenizer::decode(std::span<const int32_t> ids, bool from_start) const {
    std::string out;
    bool drop_space = from_start && add_space_prefix_;
    for (const int32_t id : ids) {
        append_piece(id, out);
        // The first text (past any BOS) begins with the space encode() put there.
        if (drop_space && !out.empty()) {
            if (out.front() == ' ') out.erase(0, 1);
            drop_space = false;
        }
    }
    return out;
}

const std::string& SpmTokenizer::token_text(int32_t id) const {
    check_id(id);
    return tokens_[id];
}

TokenType SpmTokenizer::token_type(int32_t id) const {
    check_id(id);
    return types_[id];
}

float SpmTokenizer::token_score(int32_t id) const {
    check_id(id);
    return scores_[id];
}

}  // namespace kiln
