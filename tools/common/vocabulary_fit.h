#pragma once
// A vocabulary with fewer tokens than the model has embedding rows lets the
// model pick ids that the vocabulary cannot write out: kiln would generate
// until it picked one and then fail, and kiln-perplexity would score a model
// and vocabulary that do not belong together. Checked when the two are loaded.
#include <cstdint>
#include <string>

#include "engine/core/error.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln::tools {

inline void check_vocabulary_fits(const Tokenizer& tokenizer, int64_t n_vocab, const std::string& file) {
    if (n_vocab > 0 && tokenizer.vocab_size() < static_cast<size_t>(n_vocab))
        fail("model", "{}: the vocabulary has {} tokens but the model's embedding has {} rows (the model could pick "
             "tokens the vocabulary cannot write out; a different model's vocabulary?)", file, tokenizer.vocab_size(),
             n_vocab);
}

}  // namespace kiln::tools
