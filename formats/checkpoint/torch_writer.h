#pragma once
// Writing a torch.save archive (the zip layout torch_checkpoint.h reads):
//   archive/data.pkl     the pickled object (pickle_writer.h), protocol 2
//   archive/data/<key>   each storage's bytes, little-endian, 64-byte aligned
//   archive/version      "3\n", the format version torch 1.6+ writes and reads
//   archive/byteorder    "little" (torch >= 2.1 writes it; older ones ignore it)
// torch.load reads the result on PyTorch 1.6 and later, and with
// weights_only=True as long as the pickle holds no float (torch < 2.0's
// restricted unpickler lacks BINFLOAT).
//
// Written atomically (formats/io/atomic_file.h): a temporary file beside the
// target, renamed over it once complete; an error leaves nothing behind.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "formats/checkpoint/pickle_writer.h"

namespace kiln {

struct TorchStorage {
    std::string key;                   // what the pickle's TensorRecords name
    std::span<const std::byte> bytes;  // the storage's elements
};

// Every TensorRecord in `root` must name one of `storages`, whose bytes must
// hold its storage_numel elements (checked, naming the storage).
// `force_zip64` writes the zip64 forms even for a small archive (tests).
void write_torch_checkpoint(const std::filesystem::path& path, const pickle::PickleValue& root,
                            const std::vector<TorchStorage>& storages, bool force_zip64 = false);

}  // namespace kiln
