#include "engine/runtime/beam_search.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace kiln {

namespace {

struct Candidate {
    double score;
    int32_t hyp;
    int32_t token;
};

bool better(const Candidate& a, const Candidate& b) noexcept {
    if (a.score != b.score) return a.score > b.score;
    if (a.hyp != b.hyp) return a.hyp < b.hyp;
    return a.token < b.token;
}

// log_softmax of one row, in double precision.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
    double max = -INFINITY;
    for (float v : logits) max = std::max(max, static_cast<double>(v));
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
    const double log_z = max + std::log(sum);
    out.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

struct Live {
    std::vector<int32_t> tokens;
    double log_prob;
};

}  // namespace

std::vector<Hypothesis> beam_search(std::span<const float> first_logits, int64_t n_vocab, const BeamParams& params,
                                    const BeamAdvance& advance) {
    if (params.beams < 1) fail("beam", "the number of beams must be at least 1, got {}", params.beams);
    if (n_vocab < 1 || first_logits.size() != static_cast<size_t>(n_vocab))
        fail("beam", "expected {} logits, got {}", n_vocab, first_logits.size());
    const auto k = static_cast<size_t>(params.beams);
    const size_t keep = 2 * k;
    auto normalized = [&](double log_prob, size_t length) {
        return log_prob / std::pow(static_cast<double>(length), params.length_penalty);
    };

    std::vector<Hypothesis> finished;
    std::vector<Live> live{{{}, 0.0}};
    std::span<const float> logits = first_logits;
    std::vector<double> logp;
    std::vector<Candidate> candidates, row;
    for (int64_t step = 1; step <= params.max_tokens; ++step) {
        candidates.clear();
        for (size_t h = 0; h < live.size(); ++h) {
            log_softmax(logits.subspan(h * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab)), logp);
            // Only a hypothesis's own 2K best can be among the 2K best overall.
            row.clear();
            for (int32_t t = 0; t < n_vocab; ++t)
                row.push_back({live[h].log_prob + logp[static_cast<size_t>(t)], static_cast<int32_t>(h), t});
            const size_t n = std::min(keep, row.size());
            std::partial_sort(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n), row.end(), better);
            candidates.insert(candidates.end(), row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n));
        }
        const size_t n = std::min(keep, candidates.size());
        std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(n), candidates.end(),
                          better);

        std::vector<Live> next;
        std::vector<int32_t> parents, tokens;
        for (size_t r = 0; r < n && next.size() < k; ++r) {
            const Candidate& c = candidates[r];
            const Live& parent = live[static_cast<size_t>(c.hyp)];
            std::vector<int32_t> seq = parent.tokens;
            seq.push_back(c.token);
            if (c.token == params.eos ||
                std::binary_search(params.other_ends.begin(), params.other_ends.end(), c.token)) {
                if (r < k) finished.push_back({seq, c.score, normalized(c.score, seq.size()), true});
                continue;
            }
            next.push_back({std::move(seq), c.score});
            parents.push_back(c.hyp);
            tokens.push_back(c.token);
        }
        live = std::move(next);
        if (finished.size() >= k || live.empty()) break;
        if (step == params.max_tokens) {
            for (Live& l : live) finished.push_back({l.tokens, l.log_prob, normalized(l.log_prob, l.tokens.size()), false});
            break;
        }
        logits = advance(parents, tokens);
        if (logits.size() != live.size() * static_cast<size_t>(n_vocab))
            fail("beam", "the decoder returned {} logits for {} hypotheses", logits.size(), live.size());
    }
    std::stable_sort(finished.begin(), finished.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    return finished;
}

}  // namespace kiln
