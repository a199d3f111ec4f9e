#pragma once
// A character-level corpus: the vocabulary is every distinct character of the
// text (UTF-8), sorted by code point, as the "char" tokenizer of docs/architectures.md, char vocabulary
// stores it; the encoded text is split 90/10 into training and validation
// parts, and batches are random windows drawn with a seeded generator.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/distributed/collective.h"
#include "engine/train/rng.h"

namespace kiln::train {

class CharVocabulary {
public:
    // Every distinct character of `text`; kiln::Error for invalid UTF-8 or an empty text.
    static CharVocabulary from_text(std::string_view text);
    explicit CharVocabulary(std::vector<std::string> tokens);

    // Token ids of every character; kiln::Error for a character not in the vocabulary.
    std::vector<int32_t> encode(std::string_view text) const;
    std::string decode(const std::vector<int32_t>& ids) const;
    const std::vector<std::string>& tokens() const noexcept { return tokens_; }
    size_t size() const noexcept { return tokens_.size(); }

private:
    std::vector<std::string> tokens_;  // each one UTF-8 character, sorted by code point
};

struct CharCorpus {
    CharVocabulary vocabulary;
    std::vector<int32_t> train, validation;

    // The first 90% of the tokens train, the rest validate. kiln::Error when
    // either part is too short for one window of `context` + 1 tokens.
    static CharCorpus from_text(std::string_view text, int64_t context, double train_fraction = 0.9);
    static CharCorpus from_text(std::string_view text, CharVocabulary vocabulary, int64_t context,
                                double train_fraction = 0.9);
};

// Token ids split into a training part (the first train_fraction) and a
// validation part. kiln::Error when either is too short for one window of
// `context` + 1 tokens; `unit` names what was counted ("characters", "tokens").
void split_tokens(std::vector<int32_t> ids, int64_t context, double train_fraction, std::string_view unit,
                  std::vector<int32_t>& train, std::vector<int32_t>& validation);

// `batch` windows of `context` tokens starting at random offsets of `data`:
// inputs[b * context + t] = data[s_b + t], targets = the next token. With
// `rows`, every window is drawn (the generator advances as for the whole
// batch) but only windows rows.begin .. rows.end - 1 are written, from
// inputs[0] on (a rank's share of a data-parallel batch).
void sample_windows(const std::vector<int32_t>& data, int64_t batch, int64_t context, Rng& rng, int32_t* inputs,
                    int32_t* targets, Share rows);
inline void sample_windows(const std::vector<int32_t>& data, int64_t batch, int64_t context, Rng& rng, int32_t* inputs,
                           int32_t* targets) {
    sample_windows(data, batch, context, rng, inputs, targets, Share{0, batch});
}

}  // namespace kiln::train
