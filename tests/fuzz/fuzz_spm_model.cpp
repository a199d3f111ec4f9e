// libFuzzer entry for a SentencePiece tokenizer.model (a protobuf read by hand,
// formats/checkpoint/spm_model.h), given to kiln-convert --tokenizer
// (add_tokenizer_file) for a model with as many embedding rows as the file
// has pieces when it parses, 8 otherwise. Anything but a result or kiln::Error
// (a crash, a sanitizer report, another exception type, a hang, an
// out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/core/error.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/checkpoint/tokenizer_source.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint64_t rows = 8;
    try {
        rows = kiln::parse_spm_model(std::as_bytes(std::span(data, size)), "fuzz.model").pieces.size();
    } catch (const kiln::Error&) {
        // malformed: add_tokenizer_file below must say so too
    }
    const auto path = kiln::fuzz::input_file("tokenizer.model", data, size);
    kiln::Checkpoint checkpoint;
    try {
        kiln::add_tokenizer_file(checkpoint, path, rows);
    } catch (const kiln::Error&) {
        // the expected outcome for a vocabulary kiln cannot read
    }
    return 0;
}
