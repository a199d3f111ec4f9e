#pragma once
// Beam search over any decoder that can advance several hypotheses in one
// batched step (decoder-only sessions and the encoder-decoder's decoder alike).
//
// The rules (kept identical to the Python reference in tests/reference/):
// - one live hypothesis to start, log-probability 0;
// - each step, every live hypothesis h gives candidates (h, token,
//   score_h + log_softmax(logits_h)[token]), log_softmax in double precision;
//   the 2K best over all hypotheses are kept, best first, ties to the lower h,
//   then the lower token id;
// - walking those in order with rank r, an EOS candidate with r < K is a
//   finished hypothesis with score / L^A (L: tokens generated including the
//   EOS, A: the length penalty), an EOS candidate with r >= K is dropped, and
//   any other candidate becomes live until K are live;
// - the search stops once K hypotheses have finished, or after max_tokens
//   steps, when the live ones are finished as they are (L = tokens generated).
// Finished hypotheses come back best first (stable: on a tie the one that
// finished first). With K = 1 this is greedy decoding that stops at EOS.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace kiln {

struct BeamParams {
    int32_t beams = 4;            // K
    double length_penalty = 1.0;  // A
    int64_t max_tokens = 128;     // steps at most
    int32_t eos = -1;             // -1: no hypothesis finishes before max_tokens
    // Other ids that finish a hypothesis as EOS does (end-of-turn tokens such
    // as <|im_end|>: Tokenizer::is_eog), ascending.
    std::vector<int32_t> other_ends;
};

struct Hypothesis {
    std::vector<int32_t> tokens;  // generated tokens, the EOS included when it ended one
    double log_prob = 0;          // sum of the tokens' log-probabilities
    double score = 0;             // log_prob / L^A
    bool ended_by_eos = false;
};

// Advances the decoder one step: live hypothesis i continues the one that
// was live as parents[i] (slot reordering) with tokens[i]. Returns the logits
// of every new live hypothesis, [parents.size(), n_vocab], row i for slot i.
using BeamAdvance =
    std::function<std::span<const float>(std::span<const int32_t> parents, std::span<const int32_t> tokens)>;

// first_logits: the logits after the prompt (the single initial hypothesis).
// Throws kiln::Error for beams < 1 or logits of the wrong size.
std::vector<Hypothesis> beam_search(std::span<const float> first_logits, int64_t n_vocab, const BeamParams& params,
                                    const BeamAdvance& advance);

}  // namespace kiln
