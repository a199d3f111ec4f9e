// libFuzzer entry for nanoGPT's meta.pkl (formats/checkpoint/char_vocabulary.h:
// the whitelist unpickler, then the character vocabulary checks), as
// kiln-convert --tokenizer reads it, for a model with as many rows as the
// vocabulary has tokens. Anything but a result or kiln::Error (a crash, a
// sanitizer report, another exception type, a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>

#include "engine/core/error.h"
#include "formats/checkpoint/char_vocabulary.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = kiln::fuzz::input_file("meta.pkl", data, size);
    kiln::Checkpoint checkpoint;
    try {
        const kiln::CharVocabulary vocabulary = kiln::read_nanogpt_meta(path);
        kiln::add_char_tokenizer(checkpoint, vocabulary, vocabulary.tokens.size(), path.string());
    } catch (const kiln::Error&) {
        // the expected outcome for a vocabulary kiln cannot read
    }
    return 0;
}
