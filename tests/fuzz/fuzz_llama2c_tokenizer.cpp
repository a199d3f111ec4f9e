// libFuzzer entry for llama2.c's tokenizer.bin (formats/checkpoint/llama2c.h),
// given to kiln-convert --tokenizer (add_tokenizer_file). The format has no
// token count (the model's vocab_size is it): the model here has as many rows
// as the input holds whole records, so mutations reach the pieces rather than
// the count check. Anything but a result or kiln::Error (a crash, a sanitizer
// report, another exception type, a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/error.h"
#include "formats/checkpoint/tokenizer_source.h"
#include "fuzz_input_file.h"

namespace {

// Records of (float score, int32 length, bytes) after the 4-byte header.
uint64_t whole_records(const uint8_t* data, size_t size) {
    uint64_t count = 0;
    for (size_t at = 4; at <= size && size - at >= 8; ++count) {
        int32_t length = 0;
        std::memcpy(&length, data + at + 4, 4);
        if (length < 0 || static_cast<uint64_t>(length) > size - at - 8) break;
        at += 8 + static_cast<size_t>(length);
    }
    return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = kiln::fuzz::input_file("tokenizer.bin", data, size);
    kiln::Checkpoint checkpoint;
    try {
        kiln::add_tokenizer_file(checkpoint, path, whole_records(data, size));
    } catch (const kiln::Error&) {
        // the expected outcome for a vocabulary kiln cannot read
    }
    return 0;
}
