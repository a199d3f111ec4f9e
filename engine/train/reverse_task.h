#pragma once
// A generated sequence-to-sequence task for the encoder-decoder: reverse a
// string of lowercase letters. The vocabulary is <pad>, <s> (decoder start),
// </s> (end) and a..z; held-out examples are drawn once from their own seed and
// never appear in training batches.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/train/rng.h"
#include "engine/train/seq2seq_gguf.h"

namespace kiln::train {

class ReverseTask {
public:
    static constexpr int32_t kPad = 0, kBos = 1, kEos = 2, kFirstLetter = 3;

    ReverseTask(int64_t max_length, int64_t held_out, uint64_t seed);

    // The sequence length the model needs: the longest string plus </s>.
    int64_t sequence_length() const noexcept { return max_length_ + 1; }
    static std::vector<std::string> vocabulary();
    // The vocabulary as the model file stores it: letters normal, the rest control tokens.
    static Seq2SeqVocabulary model_vocabulary();
    static std::vector<int32_t> encode(const std::string& text);
    static std::string decode(const std::vector<int32_t>& ids);  // stops at </s>

    // A random training string (never one of the held-out ones).
    std::string sample(Rng& rng) const;
    const std::vector<std::string>& held_out() const noexcept { return held_out_; }
    static std::string answer(const std::string& text) { return {text.rbegin(), text.rend()}; }
    // The fraction of answers[i] equal to answer(texts[i]).
    static double exact_match(const std::vector<std::string>& texts, const std::vector<std::string>& answers);

    // Teacher-forcing rows for one pair at row offset b * len: source = text +
    // </s> then <pad> (mask 1 on real tokens), decoder input = <s> + answer,
    // labels = answer + </s> then -1.
    void fill(const std::string& text, int64_t b, int32_t* source, int8_t* mask, int32_t* decoder_input,
              int32_t* labels) const;

private:
    std::string random_string(Rng& rng) const;

    int64_t max_length_;
    std::vector<std::string> held_out_;
    std::unordered_set<std::string> held_out_set_;
};

}  // namespace kiln::train
