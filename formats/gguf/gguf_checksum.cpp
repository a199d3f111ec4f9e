#include "formats/gguf/gguf_checksum.h"

#include "engine/core/error.h"
#include "formats/io/crc32.h"

namespace kiln {

void verify_tensor_data_checksum(const GgufFile& file) {
    const GgufValue* stored = file.find(kTensorDataChecksumKey);
    if (stored == nullptr) return;
    const auto* expected = std::get_if<uint32_t>(&stored->value);
    if (expected == nullptr)
        fail("gguf", "{}: metadata key '{}' has type {} (expected u32)", file.name(), kTensorDataChecksumKey,
             gguf_type_name(stored->type()));
    uint32_t crc = 0;
    for (const GgufTensor& t : file.tensors()) crc = crc32_update(crc, t.data);
    if (crc != *expected)
        fail("gguf", "{}: the tensor data does not match its checksum (CRC-32 {:08x}, the file says {:08x}): the file "
             "is damaged", file.name(), crc, *expected);
}

}  // namespace kiln
