#pragma once
// What kiln-convert is about to write, checked with the rules kiln's loader
// applies (the architecture's hyper-parameters from formats/arch, the
// vocabulary through load_tokenizer) before any tensor is converted or any
// file created: a GGUF that kiln would refuse to load (a merge naming an
// unknown token, a NaN score, a context of 2^32 - 1, a BOS id outside the
// vocabulary) is refused here with the loader's own message, instead of being
// written with exit status 0.
#include <string>

#include "formats/checkpoint/checkpoint.h"

namespace kiln::convert {

// `output` names the file in messages. Architectures kiln does not run are
// not checked (kiln-convert re-quantizes any GGUF); a vocabulary is checked
// whenever there is one.
void check_loadable(const Checkpoint& c, const std::string& output);

}  // namespace kiln::convert
