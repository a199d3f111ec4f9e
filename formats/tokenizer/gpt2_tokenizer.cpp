#include "formats/tokenizer/gpt2_tokenizer.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/utf8.h"
#include "formats/tokenizer/vocab_metadata.h"

namespace kiln {

namespace {

using vocab::kComponent;

bool stands_for_itself(uint8_t byte) noexcept {
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

// The byte-level alphabet's inverse, for the 324 code points below U+0144
// (-1: not a character of the alphabet).
std::array<int16_t, 0x144> make_char_bytes() {
    std::array<int16_t, 0x144> out;
    out.fill(-1);
    for (int b = 0; b < 256; ++b) out[Gpt2Tokenizer::byte_char(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return out;
}

// The bytes a token text stands for.
std::string decode_token_text(std::string_view text) {
    static const std::array<int16_t, 0x144> char_bytes = make_char_bytes();
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        const Utf8Scan scan = utf8_scan(text);
        const size_t length = scan.status == Utf8Status::complete ? scan.length : 1;
        if (scan.status == Utf8Status::complete) {
            const char32_t cp = utf8_code_point(text, length);
            if (cp < char_bytes.size() && char_bytes[cp] >= 0) {
                out.push_back(static_cast<char>(char_bytes[cp]));
                text.remove_prefix(length);
                continue;
            }
        }
        out.append(text.substr(0, length));  // outside the alphabet: the text as it is
        text.remove_prefix(length);
    }
    return out;
}

// The UTF-8 of each byte's character in the byte-level alphabet.
const std::string& byte_spelling(uint8_t byte) {
    static const std::array<std::string, 256> spellings = [] {
        std::array<std::string, 256> out;
        for (int b = 0; b < 256; ++b) utf8_append(out[b], Gpt2Tokenizer::byte_char(static_cast<uint8_t>(b)));
        return out;
    }();
    return spellings[byte];
}

uint64_t merge_key(int32_t left, int32_t right) noexcept {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

size_t merge_hash(uint64_t key) noexcept {
    // Fibonacci hashing: the multiply spreads both ids over the upper bits.
    const uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 29));
}

}  // namespace

char32_t Gpt2Tokenizer::byte_char(uint8_t byte) noexcept {
    if (stands_for_itself(byte)) return byte;
    // The others count up from U+0100 in byte order.
    char32_t n = 0;
    for (int b = 0; b < byte; ++b)
        if (!stands_for_itself(static_cast<uint8_t>(b))) ++n;
    return 0x100 + n;
}

namespace {

std::string check_gpt2_model(const GgufFile& file) {
    const std::string model = vocab::model_name(file);
    if (model != "gpt2")
        fail(kComponent, "{}: tokenizer.ggml.model is '{}', but this tokenizer reads 'gpt2' (byte-level BPE) "
             "vocabularies", file.name(), printable(model));
    const GgufValue* pre = file.find("tokenizer.ggml.pre");
    if (pre == nullptr) return {};  // llama.cpp takes "default" (and warns)
    if (pre->as_string() == nullptr)
        fail(kComponent, "{}: metadata key 'tokenizer.ggml.pre' has type {} (expected str)", file.name(),
             gguf_type_name(pre->type()));
    return *pre->as_string();
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const GgufFile& file) : pretokenizer_(check_gpt2_model(file), file.name()) {
    tokens_ = vocab::require_tokens(file);
    const size_t n = tokens_.size();
    types_ = vocab::optional_token_types(file, n);

    // Token texts to ids: the first of a text listed twice wins; control
    // tokens are never symbols, so no merge may use or make one.
    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(n);
    pieces_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const bool control = types_[i] == TokenType::control;
        if (!control) ids.emplace(tokens_[i], static_cast<int32_t>(i));
        pieces_.push_back(control ? std::string() : decode_token_text(tokens_[i]));
    }
    for (int b = 0; b < 256; ++b) {
        std::string text;
        utf8_append(text, byte_char(static_cast<uint8_t>(b)));
        const auto found = ids.find(text);
        byte_tokens_[b] = found == ids.end() ? -1 : found->second;
    }

    const GgufArray& merges = vocab::require_array(file, "tokenizer.ggml.merges", "str",
                                                   [](GgufType t) noexcept { return t == GgufType::STRING; });
    merge_count_ = merges.items.size();
    if (merge_count_ > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(kComponent, "{}: tokenizer.ggml.merges has {} entries, more than int32 ranks can number", file.name(),
             merge_count_);
    size_t capacity = 16;
    while (capacity < 2 * merge_count_) capacity *= 2;
    merge_table_.assign(capacity, MergeSlot{kEmptyKey, 0, 0});
    const auto token_of = [&](std::string_view text, size_t rank, std::string_view merge) {
        const auto found = ids.find(text);
        if (found == ids.end())
            fail(kComponent, "{}: tokenizer.ggml.merges[{}] '{}' needs the token '{}', which the vocabulary lacks "
                 "(or has only as a control token)", file.name(), rank, printable(merge), printable(text));
        return found->second;
    };
    for (size_t rank = 0; rank < merge_count_; ++rank) {
        const std::string_view merge = *merges.items[rank].as_string();
        // The space separates the parts; a part never holds a space of its own
        // (the byte-level alphabet spells it "Ġ"), but may start with one in
        // other alphabets, hence the search from the second byte.
        const size_t space = merge.size() < 2 ? std::string_view::npos : merge.find(' ', 1);
        if (space == std::string_view::npos || space + 1 == merge.size())
            fail(kComponent, "{}: tokenizer.ggml.merges[{}] is '{}' (expected two tokens separated by a space)",
                 file.name(), rank, printable(merge));
        const std::string_view left_text = merge.substr(0, space), right_text = merge.substr(space + 1);
        const int32_t left = token_of(left_text, rank, merge);
        const int32_t right = token_of(right_text, rank, merge);
        const int32_t result = token_of(std::string(left_text) + std::string(right_text), rank, merge);

        const uint64_t key = merge_key(left, right);
        const size_t mask = merge_table_.size() - 1;
        for (size_t slot = merge_hash(key) & mask;; slot = (slot + 1) & mask) {
            MergeSlot& entry = merge_table_[slot];
            if (entry.key == kEmptyKey || entry.key == key) {  // a pair listed again takes its later rank
                entry = {key, static_cast<int32_t>(rank), result};
                break;
            }
        }
    }

    // llama.cpp's defaults for byte-level BPE: bos and eos 11 (Falcon's "<|endoftext|>").
    const int32_t fallback = n > 11 ? 11 : -1;
    bos_ = vocab::optional_token_id(file, "tokenizer.ggml.bos_token_id", n);
    if (bos_ < 0 && file.find("tokenizer.ggml.bos_token_id") == nullptr && !pretokenizer_.bos_default_none())
        bos_ = fallback;
    eos_ = vocab::optional_token_id(file, "tokenizer.ggml.eos_token_id", n);
    if (eos_ < 0) eos_ = fallback;
    pad_ = vocab::optional_token_id(file, "tokenizer.ggml.padding_token_id", n);
    add_bos_ = vocab::optional_bool(file, "tokenizer.ggml.add_bos_token", pretokenizer_.add_bos_default());
    add_eos_ = vocab::optional_bool(file, "tokenizer.ggml.add_eos_token", false);
    if (add_eos_ && eos_ < 0)
        fail(kComponent, "{}: tokenizer.ggml.add_eos_token is true but there is no tokenizer.ggml.eos_token_id",
             file.name());

    special_ = read_special_tokens(file, tokens_, types_, eos_);
    // Tokens llama.cpp turns into control tokens (end-of-turn markers) are
    // not text when decoded either.
    for (size_t i = 0; i < n; ++i)
        if (special_.types[i] == TokenType::control) pieces_[i].clear();
    types_ = special_.types;
    if (pretokenizer_.ignore_merges()) {
        whole_ids_.reserve(n);
        for (size_t i = 0; i < n; ++i) whole_ids_[tokens_[i]] = static_cast<int32_t>(i);
    }
    if (add_bos_ && bos_ < 0)
        fail(kComponent, "{}: tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id",
             file.name());
}

const Gpt2Tokenizer::MergeSlot* Gpt2Tokenizer::find_merge(int32_t left, int32_t right) const noexcept {
    const uint64_t key = merge_key(left, right);
    const size_t mask = merge_table_.size() - 1;
    for (size_t slot = merge_hash(key) & mask;; slot = (slot + 1) & mask) {
        const MergeSlot& entry = merge_table_[slot];
        if (entry.key == key) return &entry;
        if (entry.key == kEmptyKey) return nullptr;  // the table always has free slots, so this ends
    }
}

// A symbol of the pre-token being merged; merged-away symbols have id -1.
struct Gpt2Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
};

// An adjacent pair that had a merge when it was queued. It is stale when
// either side has changed since (checked by the ids and the link).
struct Gpt2Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
};

struct Gpt2Tokenizer::Workspace {
    std::vector<Gpt2Symbol> symbols;
    std::vector<Gpt2Candidate> queue;    // a binary heap: lowest rank, then leftmost, on top
    std::vector<Gpt2Candidate> pending;  // pairs made by the merge being applied
};

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    std::vector<int32_t> out;
    if (options.add_bos && bos_ >= 0) out.push_back(bos_);
    // Symbols are linked by int32 indices within a pre-token.
    if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(kComponent, "a text of {} bytes is too long to encode at once (the limit is 2 GiB); split it",
             text.size());
    out.reserve(out.size() + text.size() / 3);
    Workspace work;
    std::string spelled;  // a pre-token in the byte-level alphabet, for ignore_merges
    for (const TextFragment& fragment : partition_special(text, special_, tokens_, options.parse_special)) {
        if (fragment.token >= 0) {
            out.push_back(fragment.token);
            continue;
        }
        for (const std::string& word : pretokenizer_.split(fragment.text)) {
            if (pretokenizer_.ignore_merges()) {
                spelled.clear();
                for (const char c : word) spelled += byte_spelling(static_cast<uint8_t>(c));
                if (const auto found = whole_ids_.find(spelled); found != whole_ids_.end()) {
                    out.push_back(found->second);
                    continue;
                }
            }
            encode_pretoken(word, work, out);
        }
    }
    if (options.add_eos && eos_ >= 0) out.push_back(eos_);
    return out;
}

void Gpt2Tokenizer::encode_pretoken(std::string_view bytes, Workspace& work, std::vector<int32_t>& out) const {
    std::vector<Gpt2Symbol>& symbols = work.symbols;
    symbols.clear();
    for (const char c : bytes) {
        const auto byte = static_cast<uint8_t>(c);
        const int32_t id = byte_tokens_[byte];
        if (id < 0) {
            std::string character;
            utf8_append(character, byte_char(byte));
            fail(kComponent, "the vocabulary has no token for the byte 0x{:02X} (its byte-level character '{}'), "
                 "so this text cannot be encoded", byte, character);
        }
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({id, index - 1, index + 1});
    }
    symbols.back().next = -1;
    if (symbols.size() == 1) {
        out.push_back(symbols[0].id);
        return;
    }

    std::vector<Gpt2Candidate>& queue = work.queue;
    std::vector<Gpt2Candidate>& pending = work.pending;
    queue.clear();
    pending.clear();
    // std heaps put the "largest" on top: here the highest rank, then rightmost, is "smallest".
    const auto after = [](const Gpt2Candidate& a, const Gpt2Candidate& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    const auto candidate = [&](int32_t left, int32_t right, std::vector<Gpt2Candidate>& into) {
        if (left < 0 || right < 0) return;
        const MergeSlot* merge = find_merge(symbols[left].id, symbols[right].id);
        if (merge == nullptr) return;
        into.push_back({merge->rank, left, right, symbols[left].id, symbols[right].id, merge->result});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) candidate(i - 1, i, queue);
    std::make_heap(queue.begin(), queue.end(), after);

    int32_t applying = -1;  // the rank of the merge being applied
    for (;;) {
        // encoder.py merges every occurrence of the best pair before it looks
        // for the next best, so the pairs those merges made join only then.
        if (queue.empty() || queue.front().rank != applying) {
            for (const Gpt2Candidate& c : pending) {
                queue.push_back(c);
                std::push_heap(queue.begin(), queue.end(), after);
            }
            pending.clear();
            if (queue.empty()) break;
            applying = queue.front().rank;
        }
        std::pop_heap(queue.begin(), queue.end(), after);
        const Gpt2Candidate best = queue.back();
        queue.pop_back();
        Gpt2Symbol& left = symbols[best.left];
        if (left.id != best.left_id || left.next != best.right) continue;  // left changed or not neighbours
        Gpt2Symbol& right = symbols[best.right];
        if (right.id != best.right_id) continue;                           // right grew since

        left.id = best.result;
        right.id = -1;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = best.left;
        candidate(left.prev, best.left, pending);
        candidate(best.left, left.next, pending);
    }

    // Symbol 0 is never merged away (merges absorb the right side), so it heads the list.
    for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void Gpt2Tokenizer::check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
        fail(kComponent, "token id {} is outside the vocabulary (0 to {})", id, tokens_.size() - 1);
}

std::string Gpt2Tokenizer::piece(int32_t id) const {
    check_id(id);
    return pieces_[id];
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids, bool /*from_start: GPT-2 adds no prefix*/) const {
    std::string out;
    for (const int32_t id : ids) {
        check_id(id);
        out.append(pieces_[id]);
    }
    return out;
}

const std::string& Gpt2Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return tokens_[id];
}

TokenType Gpt2Tokenizer::token_type(int32_t id) const {
    check_id(id);
    return types_[id];
}

}  // namespace kiln
