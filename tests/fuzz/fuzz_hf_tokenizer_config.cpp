// libFuzzer entry for a Hugging Face tokenizer_config.json, applied by
// add_hf_tokenizer_config() (formats/checkpoint/hf_tokenizer.h) to the
// vocabulary of tests/fixtures/gpt2/gpt2_hf, as hf_checkpoint() applies it.
// Anything but a result or kiln::Error (a crash, a sanitizer report, another
// exception type, a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "fuzz_input_file.h"

namespace {

const kiln::Checkpoint& with_vocabulary() {
    static const kiln::Checkpoint checkpoint = [] {
        kiln::Checkpoint c;
        kiln::add_hf_bpe_tokenizer(c, std::filesystem::path(KILN_SOURCE_DIR) / "tests/fixtures/gpt2/gpt2_hf/tokenizer.json",
                                   nlohmann::json::object(), 297);
        return c;
    }();
    return checkpoint;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    kiln::Checkpoint checkpoint = with_vocabulary();
    const auto path = kiln::fuzz::input_file("tokenizer_config.json", data, size);
    try {
        kiln::add_hf_tokenizer_config(checkpoint, path);
    } catch (const kiln::Error&) {
        // the expected outcome for a configuration kiln cannot apply
    }
    return 0;
}
