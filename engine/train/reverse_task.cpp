#include "engine/train/reverse_task.h"

#include "engine/core/error.h"

namespace kiln::train {

ReverseTask::ReverseTask(int64_t max_length, int64_t held_out, uint64_t seed) : max_length_(max_length) {
    if (max_length < 1) fail("task", "the longest string must have at least one letter");
    Rng rng(seed ^ 0x4e1d0a7ULL);
    int64_t attempts = 0;
    while (static_cast<int64_t>(held_out_.size()) < held_out) {
        if (++attempts > held_out * 100) fail("task", "cannot draw {} distinct strings of up to {} letters", held_out, max_length);
        std::string s = random_string(rng);
        if (held_out_set_.insert(s).second) held_out_.push_back(std::move(s));
    }
}

std::vector<std::string> ReverseTask::vocabulary() {
    std::vector<std::string> v{"<pad>", "<s>", "</s>"};
    for (char c = 'a'; c <= 'z'; ++c) v.emplace_back(1, c);
    return v;
}

Seq2SeqVocabulary ReverseTask::model_vocabulary() {
    Seq2SeqVocabulary v;
    v.tokens = vocabulary();
    v.types.assign(v.tokens.size(), 1);
    for (int32_t special : {kPad, kBos, kEos}) v.types[static_cast<size_t>(special)] = 3;
    v.special = {kBos, kEos, kPad};
    return v;
}

double ReverseTask::exact_match(const std::vector<std::string>& texts, const std::vector<std::string>& answers) {
    if (texts.size() != answers.size() || texts.empty())
        fail("task", "{} answers for {} strings", answers.size(), texts.size());
    size_t right = 0;
    for (size_t i = 0; i < texts.size(); ++i) right += answers[i] == answer(texts[i]) ? 1 : 0;
    return static_cast<double>(right) / static_cast<double>(texts.size());
}

std::vector<int32_t> ReverseTask::encode(const std::string& text) {
    std::vector<int32_t> ids;
    for (char c : text) {
        if (c < 'a' || c > 'z') fail("task", "'{}' is not a lowercase letter", c);
        ids.push_back(kFirstLetter + (c - 'a'));
    }
    return ids;
}

std::string ReverseTask::decode(const std::vector<int32_t>& ids) {
    std::string out;
    for (int32_t id : ids) {
        if (id == kEos) break;
        if (id >= kFirstLetter && id < kFirstLetter + 26) out += static_cast<char>('a' + (id - kFirstLetter));
    }
    return out;
}

std::string ReverseTask::random_string(Rng& rng) const {
    const auto length = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_length_)));
    std::string s;
    for (int64_t i = 0; i < length; ++i) s += static_cast<char>('a' + rng.below(26));
    return s;
}

std::string ReverseTask::sample(Rng& rng) const {
    for (;;) {
        std::string s = random_string(rng);
        if (!held_out_set_.contains(s)) return s;
    }
}

void ReverseTask::fill(const std::string& text, int64_t b, int32_t* source, int8_t* mask, int32_t* decoder_input,
                       int32_t* labels) const {
    const int64_t len = sequence_length();
    const std::vector<int32_t> src = encode(text);
    const std::vector<int32_t> tgt = encode(answer(text));
    const auto n = static_cast<int64_t>(src.size());
    for (int64_t t = 0; t < len; ++t) {
        const int64_t r = b * len + t;
        source[r] = t < n ? src[static_cast<size_t>(t)] : (t == n ? kEos : kPad);
        mask[r] = t <= n ? 1 : 0;
        decoder_input[r] = t == 0 ? kBos : (t <= n ? tgt[static_cast<size_t>(t - 1)] : kPad);
        labels[r] = t < n ? tgt[static_cast<size_t>(t)] : (t == n ? kEos : -1);
    }
}

}  // namespace kiln::train
