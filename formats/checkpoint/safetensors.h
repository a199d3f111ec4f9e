#pragma once
// The safetensors format (Hugging Face's plain weight container):
//
//   u64 little-endian N | N bytes of JSON header | data section
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data section start) and may hold a
// "__metadata__" object of string -> string. kiln reads F32, F16 and BF16
// tensors; any other dtype is reported by name, since a model holding one
// cannot be converted faithfully.
//
// Reading maps the file and validates everything before handing out a view:
// the header length against the file size (and a 100 MB cap, so a corrupt
// length cannot make us parse garbage for minutes), each tensor's byte size
// against its shape and dtype, every range inside the data section, no two
// ranges overlapping and no name twice. Failures throw
// kiln::Error("safetensors", "<file>: ...").
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace kiln {

class MappedFile;

struct SafetensorsTensor {
    std::string name;
    DType type = DType::F32;           // F32, F16 or BF16
    std::vector<uint64_t> shape;       // row-major, as written (PyTorch order; last dim is contiguous)
    std::span<const std::byte> data;   // exactly the tensor's bytes
};

class SafetensorsFile {
public:
    // Maps and validates `path`.
    static SafetensorsFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const noexcept { return path_; }
    // In the order their data appears in the file (safetensors' JSON object
    // itself is unordered; data order is the only order writers preserve).
    const std::vector<SafetensorsTensor>& tensors() const noexcept { return tensors_; }
    const SafetensorsTensor* find_tensor(std::string_view name) const noexcept;
    const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
    // Keeps the mapping alive for views handed to others (e.g. a Checkpoint).
    std::shared_ptr<const MappedFile> mapping() const noexcept { return file_; }

private:
    std::filesystem::path path_;
    std::shared_ptr<const MappedFile> file_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;
    std::map<std::string, std::string> metadata_;
};

// The header length is plausible for a file of `file_size` bytes and the JSON
// opens with '{'. `head` is the file's first bytes (at least 9 to say yes).
bool looks_like_safetensors(std::span<const std::byte> head, uint64_t file_size);

// Writes `tensors` (F32, F16 or BF16; data size must match the shape) in
// order, with `metadata` as "__metadata__" when not empty. The header is
// padded with spaces so the data section starts at an 8-byte boundary. The
// file appears only complete (kiln::AtomicFile).
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace kiln
