#pragma once
// A checksum of a GGUF file's tensor data, for files whose damage would go
// unnoticed otherwise: kiln-train's checkpoints hold F32 weights and optimizer
// moments, where flipped bytes are just other numbers. The CRC-32 of every
// tensor's bytes, in the order of the tensor infos (padding excluded), is
// stored under kTensorDataChecksumKey (u32). It is an ordinary metadata key,
// so the file stays a GGUF that other readers load; kiln's reader checks it
// whenever it is present.
#include <cstdint>
#include <span>

#include "formats/gguf/gguf_file.h"

namespace kiln {

inline constexpr const char* kTensorDataChecksumKey = "kiln.checksum.tensor_data_crc32";

// Throws kiln::Error("gguf") naming the file when the key is present and the
// tensor data does not match it (or the key is not a u32).
void verify_tensor_data_checksum(const GgufFile& file);

}  // namespace kiln
