// Beam search: the scoring rules against an exhaustive enumeration, K = 1
// against greedy decoding on a real model, and a batched decoder step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "engine/models/architectures.h"
#include "engine/runtime/beam_search.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"

using namespace kiln;

namespace {

// A toy decoder whose logits depend on the last token and the length only.
struct MarkovDecoder {
    int64_t n_vocab;
    std::vector<float> table;  // [n_steps][n_vocab][n_vocab]
    std::vector<std::vector<int32_t>> live{{}};
    std::vector<float> out;

    MarkovDecoder(int64_t vocab, int64_t steps, uint32_t seed) : n_vocab(vocab) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.5f);
        table.resize(static_cast<size_t>(steps * vocab * vocab));
        for (float& v : table) v = normal(rng);
    }
    std::span<const float> logits_of(const std::vector<int32_t>& seq) const {
        const int32_t last = seq.empty() ? 0 : seq.back();
        const size_t at = (seq.size() * static_cast<size_t>(n_vocab) + static_cast<size_t>(last)) * static_cast<size_t>(n_vocab);
        return std::span(table).subspan(at, static_cast<size_t>(n_vocab));
    }
    std::span<const float> advance(std::span<const int32_t> parents, std::span<const int32_t> tokens) {
        std::vector<std::vector<int32_t>> next;
        out.clear();
        for (size_t i = 0; i < parents.size(); ++i) {
            next.push_back(live.at(static_cast<size_t>(parents[i])));
            next.back().push_back(tokens[i]);
            const auto l = logits_of(next.back());
            out.insert(out.end(), l.begin(), l.end());
        }
        live = std::move(next);
        return out;
    }
};

double log_prob_of(const MarkovDecoder& d, const std::vector<int32_t>& seq) {
    double total = 0;
    std::vector<int32_t> prefix;
    for (int32_t t : seq) {
        const auto l = d.logits_of(prefix);
        double max = -INFINITY, sum = 0;
        for (float v : l) max = std::max(max, double{v});
        for (float v : l) sum += std::exp(double{v} - max);
        total += double{l[static_cast<size_t>(t)]} - max - std::log(sum);
        prefix.push_back(t);
    }
    return total;
}

}  // namespace

TEST_CASE("a beam wide enough to keep everything finds every sequence, scored exactly", "[beam]") {
    const double penalty = GENERATE(0.0, 0.6, 1.0);
    const int64_t vocab = 3, steps = 4;
    const int32_t eos = 2;
    MarkovDecoder d(vocab, steps + 1, 42);
    BeamParams p;
    p.beams = 100;
    p.length_penalty = penalty;
    p.max_tokens = steps;
    p.eos = eos;
    const auto found = beam_search(d.logits_of({}), vocab, p,
                                   [&](auto parents, auto tokens) { return d.advance(parents, tokens); });
    // Every sequence: EOS-terminated ones of length 1..4, and the 2^4 of length 4 without EOS.
    std::vector<std::pair<double, std::vector<int32_t>>> all;
    std::function<void(std::vector<int32_t>)> grow = [&](std::vector<int32_t> seq) {
        for (int32_t t = 0; t < vocab; ++t) {
            std::vector<int32_t> s = seq;
            s.push_back(t);
            const double score = log_prob_of(d, s) / std::pow(static_cast<double>(s.size()), penalty);
            if (t == eos || static_cast<int64_t>(s.size()) == steps)
                all.emplace_back(score, s);
            else
                grow(s);
        }
    };
    grow({});
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    REQUIRE(found.size() == all.size());
    for (size_t i = 0; i < all.size(); ++i) {
        CHECK(found[i].tokens == all[i].second);
        CHECK(found[i].score == Approx(all[i].first).epsilon(1e-12));
        CHECK(found[i].ended_by_eos == (found[i].tokens.back() == eos));
    }
}

TEST_CASE("other end tokens (end of turn) finish a hypothesis as EOS does", "[beam]") {
    const int64_t vocab = 4, steps = 3;
    MarkovDecoder d(vocab, steps + 1, 7);
    BeamParams p;
    p.beams = 100;
    p.max_tokens = steps;
    p.eos = 3;
    p.other_ends = {1};
    const auto found = beam_search(d.logits_of({}), vocab, p,
                                   [&](auto parents, auto tokens) { return d.advance(parents, tokens); });
    const auto ends = [](int32_t t) { return t == 3 || t == 1; };
    size_t expected = 0;
    std::function<void(std::vector<int32_t>)> grow = [&](std::vector<int32_t> seq) {
        for (int32_t t = 0; t < vocab; ++t) {
            std::vector<int32_t> next = seq;
            next.push_back(t);
            if (ends(t) || static_cast<int64_t>(next.size()) == steps) ++expected;
            else grow(next);
        }
    };
    grow({});
    REQUIRE(found.size() == expected);
    for (const Hypothesis& h : found) {
        // Only the last token may end a hypothesis, and one that ends early ended by an end token.
        for (size_t i = 0; i + 1 < h.tokens.size(); ++i) CHECK_FALSE(ends(h.tokens[i]));
        CHECK(h.ended_by_eos == ends(h.tokens.back()));
    }
}

TEST_CASE("one beam is greedy decoding", "[beam]") {
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::fixtures_dir() / "gpt2" / "tiny_nobias.gguf"));
    const auto model = load_causal_lm(file);
    ThreadPool pool(2);
    const std::vector<int32_t> prompt{3, 14, 15, 9, 26};
    const int32_t eos = GENERATE(-1, 7);
    std::vector<int32_t> greedy;
    {
        auto s = model->new_session(40, 1, Executor::Mode::Fast);
        auto logits = s->eval(prompt, pool);
        for (int i = 0; i < 20; ++i) {
            const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            greedy.push_back(t);
            if (t == eos) break;
            logits = s->eval(std::span(&greedy.back(), 1), pool);
        }
    }
    auto s = model->new_session(40, 1, Executor::Mode::Fast);
    const auto first = s->eval(prompt, pool);
    std::vector<int32_t> slots;
    BeamParams p;
    p.beams = 1;
    p.max_tokens = 20;
    p.eos = eos;
    const auto found = beam_search(first, model->info().n_vocab, p, [&](auto parents, auto tokens) {
        s->reorder(parents);
        slots.resize(tokens.size());
        for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
        return s->eval_slots(tokens, slots, pool);
    });
    REQUIRE(found.size() == 1);
    CHECK(found[0].tokens == greedy);
}

TEST_CASE("beam search refuses zero beams", "[beam]") {
    const std::vector<float> logits{0.0f, 1.0f};
    BeamParams p;
    p.beams = 0;
    CHECK_THROWS_WITH(beam_search(logits, 2, p, [](auto, auto) { return std::span<const float>(); }),
                      Catch::Contains("at least 1"));
}
