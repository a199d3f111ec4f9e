// libFuzzer entry for the safetensors reader (formats/checkpoint/safetensors.h),
// given a file as kiln-convert gives it one: any bytes must give tensors whose
// data lies inside the file, or kiln::Error. Anything else (a crash, a
// sanitizer report, another exception type, a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "engine/core/error.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/io/mapped_file.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = kiln::fuzz::input_file("model.safetensors", data, size);
    try {
        const kiln::SafetensorsFile file = kiln::SafetensorsFile::open(path);
        const auto whole = file.mapping()->bytes();
        for (const kiln::SafetensorsTensor& t : file.tensors()) {
            if (!t.data.empty() && (t.data.data() < whole.data() || t.data.data() + t.data.size() > whole.data() + whole.size()))
                std::abort();
            if (file.find_tensor(t.name) != &t) std::abort();
        }
    } catch (const kiln::Error&) {
        // the expected outcome for malformed input
    }
    return 0;
}
