// libFuzzer entry for a Hugging Face tokenizer.json, read by
// add_hf_bpe_tokenizer() as hf_checkpoint() and kiln-convert --tokenizer read
// it (formats/checkpoint/hf_tokenizer.h), for a model with 512 embedding rows
// whose config.json names bos/eos ids. Anything but a result or kiln::Error (a
// crash, a sanitizer report, another exception type, a hang, an out-of-memory)
// is a bug.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::json config = {{"bos_token_id", 10}, {"eos_token_id", 11}};
    const auto path = kiln::fuzz::input_file("tokenizer.json", data, size);
    kiln::Checkpoint checkpoint;
    try {
        kiln::add_hf_bpe_tokenizer(checkpoint, path, config, 512);
    } catch (const kiln::Error&) {
        // the expected outcome for a vocabulary kiln cannot read
    }
    return 0;
}
