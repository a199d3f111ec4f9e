#pragma once
// Picks the next token from logits, the way llama.cpp's default chain does:
// logit biases, the penalties (repetition, presence, frequency), then top-k,
// top-p and min-p filtering, then temperature and a seeded draw. Temperature
// 0 means greedy (argmax after the biases and penalties).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kiln {

// Added to one token's logit before anything else; -infinity bans it.
struct LogitBias {
    int32_t token = 0;
    float bias = 0.0f;
};

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;           // 0: off
    float top_p = 0.95f;          // 1: off
    float min_p = 0.05f;          // 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int32_t repeat_last_n = 64;   // how many recent tokens the penalties look at
    // OpenAI's and llama.cpp's additive penalties over the same recent tokens:
    // a token seen there loses presence_penalty once and frequency_penalty
    // per occurrence (0: off).
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    std::vector<LogitBias> logit_bias;
    uint64_t seed = 0;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& params);

    // `recent` is the sequence so far (prompt included); only its last
    // repeat_last_n tokens are penalized. Logits of biased or penalized
    // tokens outside the vocabulary are left alone.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);

private:
    struct Candidate {
        int32_t id;
        float logit;
    };
    double uniform();  // [0, 1), identical on every platform for a given seed

    SamplerParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> candidates_;
    std::vector<double> probs_;
};

}  // namespace kiln
