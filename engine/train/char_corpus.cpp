#include "engine/train/char_corpus.h"

#include <algorithm>
#include <map>

#include "engine/core/error.h"
#include "formats/tokenizer/utf8.h"

namespace kiln::train {

namespace {

// Calls f(character, byte offset) for each character of valid UTF-8 text.
template <class F>
void for_each_char(std::string_view text, F f) {
    size_t at = 0;
    while (at < text.size()) {
        const Utf8Scan scan = utf8_scan(text.substr(at));
        if (scan.status != Utf8Status::complete) fail("corpus", "invalid UTF-8 at byte {}", at);
        f(text.substr(at, scan.length), at);
        at += scan.length;
    }
}

// The code point of one valid UTF-8 character.
uint32_t code_point(std::string_view c) {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(c[i])); };
    switch (c.size()) {
        case 1: return b(0);
        case 2: return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
        case 3: return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
        default: return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
    }
}

}  // namespace

CharVocabulary CharVocabulary::from_text(std::string_view text) {
    if (text.empty()) fail("corpus", "the text is empty");
    std::vector<std::string> chars;
    for_each_char(text, [&](std::string_view c, size_t) { chars.emplace_back(c); });
    // Byte order of UTF-8 strings is code point order.
    std::sort(chars.begin(), chars.end());
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    return CharVocabulary(std::move(chars));
}

CharVocabulary::CharVocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

std::vector<int32_t> CharVocabulary::encode(std::string_view text) const {
    std::map<std::string_view, int32_t> index;
    for (size_t i = 0; i < tokens_.size(); ++i) index.emplace(tokens_[i], static_cast<int32_t>(i));
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    std::string_view last;
    int32_t last_id = -1;
    for_each_char(text, [&](std::string_view c, size_t at) {
        if (c != last) {
            const auto it = index.find(c);
            if (it == index.end()) fail("corpus", "character U+{:04X} at byte {} is not in the vocabulary", code_point(c), at);
            last = c;
            last_id = it->second;
        }
        ids.push_back(last_id);
    });
    return ids;
}

std::string CharVocabulary::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids)
        if (id >= 0 && static_cast<size_t>(id) < tokens_.size()) out += tokens_[static_cast<size_t>(id)];
    return out;
}

CharCorpus CharCorpus::from_text(std::string_view text, int64_t context, double train_fraction) {
    return from_text(text, CharVocabulary::from_text(text), context, train_fraction);
}

CharCorpus CharCorpus::from_text(std::string_view text, CharVocabulary vocabulary, int64_t context,
                                 double train_fraction) {
    if (text.empty()) fail("corpus", "the text is empty");
    std::vector<int32_t> ids = vocabulary.encode(text);
    CharCorpus corpus{std::move(vocabulary), {}, {}};
    split_tokens(std::move(ids), context, train_fraction, "characters", corpus.train, corpus.validation);
    return corpus;
}

void split_tokens(std::vector<int32_t> ids, int64_t context, double train_fraction, std::string_view unit,
                  std::vector<int32_t>& train, std::vector<int32_t>& validation) {
    const auto n = static_cast<int64_t>(ids.size());
    const auto n_train = static_cast<int64_t>(static_cast<double>(n) * train_fraction);
    const int64_t need = context + 1;
    if (n_train < need || n - n_train < need)
        fail("corpus",
             "{} {} are too few for context {}: the training ({}) and validation ({}) parts each need at least {}", n,
             unit, context, n_train, n - n_train, need);
    train.assign(ids.begin(), ids.begin() + n_train);
    validation.assign(ids.begin() + n_train, ids.end());
}

void sample_windows(const std::vector<int32_t>& data, int64_t batch, int64_t context, Rng& rng, int32_t* inputs,
                    int32_t* targets, Share rows) {
    const auto starts = static_cast<uint64_t>(static_cast<int64_t>(data.size()) - context);
    for (int64_t b = 0; b < batch; ++b) {
        const auto s = static_cast<int64_t>(rng.below(starts));
        if (b < rows.begin || b >= rows.end) continue;
        const int64_t row = b - rows.begin;
        for (int64_t t = 0; t < context; ++t) {
            inputs[row * context + t] = data[static_cast<size_t>(s + t)];
            targets[row * context + t] = data[static_cast<size_t>(s + t + 1)];
        }
    }
}

}  // namespace kiln::train
