// libFuzzer entry for the GGUF reader: any input must either parse, with every
// tensor view inside the input, or throw kiln::Error. Anything else (a crash, a
// sanitizer report, another exception type, a timeout, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const kiln::GgufFile file = kiln::GgufFile::parse(bytes, "fuzz.gguf");
        for (const kiln::GgufTensor& t : file.tensors()) {
            if (t.data.data() < bytes.data() || t.data.data() + t.data.size() > bytes.data() + bytes.size()) std::abort();
        }
    } catch (const kiln::Error&) {
        // the expected outcome for malformed input
    }
    return 0;
}
