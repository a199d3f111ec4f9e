#pragma once
// Picks the next token from logits, the way llama.cpp's default chain does:
// repetition penalty, then top-k, top-p and min-p filtering, then temperature
// and a seeded draw. Temperature 0 means greedy (argmax after the penalty).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kiln {

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;           // 0: off
    float top_p = 0.95f;          // 1: off
    float min_p = 0.05f;          // 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int32_t repeat_last_n = 64;   // how many recent tokens the penalty looks at
    uint64_t seed = 0;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& params);

    // `recent` is the sequence so far (prompt included); only its last
    // repeat_last_n tokens are penalized.
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
