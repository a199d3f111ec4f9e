// libFuzzer entry for a llama2.c checkpoint (.bin: legacy, ak42 v1, v2 int8;
// formats/checkpoint/llama2c.h), read from a file as kiln-convert reads it,
// after the content detection kiln-convert uses to choose the reader. Anything
// but a result or kiln::Error (a crash, a sanitizer report, another exception
// type, a hang, an out-of-memory) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/core/error.h"
#include "formats/checkpoint/llama2c.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto head = std::as_bytes(std::span(data, std::min<size_t>(size, 256)));
    (void)kiln::looks_like_llama2c(head, size);
    const auto path = kiln::fuzz::input_file("model.bin", data, size);
    try {
        (void)kiln::read_llama2c(path, nullptr);
    } catch (const kiln::Error&) {
        // the expected outcome for a file kiln cannot read
    }
    return 0;
}
