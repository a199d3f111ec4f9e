// Sampling: greedy, penalties, filters, and draws that follow the distribution.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "engine/runtime/sampler.h"

using kiln::Sampler;
using kiln::SamplerParams;

namespace {

SamplerParams plain(float temperature) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

}  // namespace

TEST_CASE("temperature 0 is greedy, and the repeat penalty can change its choice", "[sampler]") {
    const std::vector<float> logits{0.5f, 3.0f, 2.9f, -1.0f};
    Sampler greedy(plain(0.0f));
    CHECK(greedy.sample(logits, {}) == 1);
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 1.1f;  // 3.0 / 1.1 = 2.73 < 2.9
    Sampler penalized(p);
    const std::vector<int32_t> recent{1};
    CHECK(penalized.sample(logits, recent) == 2);
    p.repeat_last_n = 1;
    Sampler short_memory(p);
    const std::vector<int32_t> older{1, 3};  // token 1 is outside the last 1
    CHECK(short_memory.sample(logits, older) == 1);
    // Negative logits are pushed further down, not up.
    const std::vector<float> negative{-1.0f, -1.05f};
    const std::vector<int32_t> first{0};
    Sampler neg(p);
    CHECK(neg.sample(negative, first) == 1);
}

TEST_CASE("logit biases come first, and -infinity bans a token", "[sampler]") {
    const std::vector<float> logits{0.5f, 3.0f, 2.9f, -1.0f};
    SamplerParams p = plain(0.0f);
    p.logit_bias = {{3, 4.5f}};  // -1 + 4.5 = 3.5 > 3.0
    CHECK(Sampler(p).sample(logits, {}) == 3);
    p.logit_bias = {{1, -INFINITY}, {7, 100.0f}};  // 7 is outside the vocabulary: left alone
    CHECK(Sampler(p).sample(logits, {}) == 2);
    // Before the penalties: (1.0 + 1.0) / 2 = 1.0 < 1.2, where penalizing
    // first would give 1.0 / 2 + 1.0 = 1.5 > 1.2.
    const std::vector<float> two{1.2f, 1.0f};
    p.logit_bias = {{1, 1.0f}};
    p.repeat_penalty = 2.0f;
    const std::vector<int32_t> recent{1};
    CHECK(Sampler(p).sample(two, recent) == 0);
    // A banned token is never drawn.
    SamplerParams hot = plain(1.0f);
    hot.logit_bias = {{1, -INFINITY}};
    Sampler draws(hot);
    const std::vector<float> flat{0.0f, 0.0f, 0.0f};
    std::map<int32_t, int> seen;
    for (int i = 0; i < 3000; ++i) ++seen[draws.sample(flat, {})];
    CHECK(seen.count(1) == 0);
    CHECK(seen[0] > 1300);
    CHECK(seen[2] > 1300);
}

TEST_CASE("presence and frequency penalties: once, and per occurrence, after the repeat penalty", "[sampler]") {
    const std::vector<float> logits{3.0f, 2.0f, 0.0f};
    const std::vector<int32_t> thrice{0, 0, 0};
    SamplerParams p = plain(0.0f);
    p.frequency_penalty = 0.3f;  // 3 - 3 x 0.3 = 2.1 > 2.0
    CHECK(Sampler(p).sample(logits, thrice) == 0);
    p.frequency_penalty = 0.4f;  // 3 - 3 x 0.4 = 1.8 < 2.0
    CHECK(Sampler(p).sample(logits, thrice) == 1);
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.9f;  // once, however often: 3 - 0.9 = 2.1
    CHECK(Sampler(p).sample(logits, thrice) == 0);
    p.presence_penalty = 1.1f;  // 1.9
    CHECK(Sampler(p).sample(logits, thrice) == 1);
    p.repeat_last_n = 0;  // no window: nothing is penalized
    CHECK(Sampler(p).sample(logits, thrice) == 0);
    // llama.cpp's order: divide by the repeat penalty, then subtract:
    // 3 / 1.5 - 0.5 = 1.5 < 1.6 (subtracting first would give 1.67 > 1.6).
    const std::vector<float> close{3.0f, 1.6f};
    SamplerParams q = plain(0.0f);
    q.repeat_penalty = 1.5f;
    q.presence_penalty = 0.5f;
    const std::vector<int32_t> once{0};
    CHECK(Sampler(q).sample(close, once) == 1);
}

TEST_CASE("draws follow softmax(logits / T)", "[sampler]") {
    const std::vector<float> logits{1.0f, 2.0f, 0.0f, 1.5f};
    for (float temperature : {1.0f, 0.5f}) {
        Sampler s([&] {
            SamplerParams p = plain(temperature);
            p.seed = 1234;
            return p;
        }());
        std::vector<int> counts(4, 0);
        constexpr int kDraws = 40000;
        for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(s.sample(logits, {}))];
        double z = 0;
        for (float l : logits) z += std::exp(l / temperature);
        for (size_t i = 0; i < 4; ++i) {
            const double p = std::exp(logits[i] / temperature) / z;
            const double sd = std::sqrt(p * (1 - p) / kDraws);
            INFO("token " << i << " T " << temperature);
            CHECK(std::abs(counts[i] / double(kDraws) - p) < 5 * sd);  // 5 sigma: fails by chance ~1e-6
        }
    }
}

TEST_CASE("top-k, top-p and min-p never let a filtered token through", "[sampler]") {
    // Probabilities at T=1: about 0.64, 0.24, 0.09, 0.03
    const std::vector<float> logits{3.0f, 2.0f, 1.0f, -0.1f};
    auto draws = [&](SamplerParams p) {
        p.seed = 99;
        Sampler s(p);
        std::map<int32_t, int> seen;
        for (int i = 0; i < 5000; ++i) ++seen[s.sample(logits, {})];
        return seen;
    };
    SamplerParams k = plain(1.0f);
    k.top_k = 2;
    auto seen = draws(k);
    CHECK(seen.size() == 2);
    CHECK(seen.count(0) == 1);
    CHECK(seen.count(1) == 1);

    SamplerParams top_p = plain(1.0f);
    top_p.top_p = 0.7f;  // 0.64 < 0.7 <= 0.64 + 0.24: the nucleus is tokens 0 and 1
    seen = draws(top_p);
    CHECK(seen.size() == 2);
    CHECK(seen.count(2) == 0);

    SamplerParams min_p = plain(1.0f);
    min_p.min_p = 0.1f;  // keeps p >= 0.064: tokens 0, 1, 2
    seen = draws(min_p);
    CHECK(seen.size() == 3);
    CHECK(seen.count(3) == 0);
}

TEST_CASE("the same seed gives the same draws, another seed other draws", "[sampler]") {
    std::vector<float> logits(100);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 2;
    auto run = [&](uint64_t seed) {
        SamplerParams p = plain(1.0f);
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> out;
        for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits, out));
        return out;
    };
    CHECK(run(5) == run(5));
    CHECK(run(5) != run(6));
}
