#pragma once
// A vocabulary with fewer tokens than the model has embedding rows lets the
// model pick ids that the vocabulary cannot write out: kiln would generate
// until it picked one and then fail, and kiln-perplexity would score a model
// and vocabulary that do not belong together. Checked when the two are loaded.
#include <cstdint>
#include <string>

#include "engine/core/error.h"
#include "engine/runtime/sampler.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln::tools {

inline void check_vocabulary_fits(const Tokenizer& tokenizer, int64_t n_vocab, const std::string& file) {
    if (n_vocab > 0 && tokenizer.vocab_size() < static_cast<size_t>(n_vocab))
        fail("model", "{}: the vocabulary has {} tokens but the model's embedding has {} rows (the model could pick "
             "tokens the vocabulary cannot write out; a different model's vocabulary?)", file, tokenizer.vocab_size(),
             n_vocab);
}

// --logit-bias names tokens by id: one past the vocabulary is a mistake, not a no-op.
inline void check_logit_bias_tokens(const SamplerParams& sampling, int64_t n_vocab) {
    for (const LogitBias& b : sampling.logit_bias)
        if (b.token < 0 || b.token >= n_vocab)
            fail("kiln", "--logit-bias token {} is outside the vocabulary (0..{})", b.token, n_vocab - 1);
}

}  // namespace kiln::tools
