#pragma once
// Writing GGUF v3 files: metadata in insertion order, then tensor infos, then
// tensor data, each tensor aligned to general.alignment (32 unless set). The
// layout matches llama.cpp's writer, so rewriting a llama.cpp file reproduces it
// byte for byte. write() goes through a temporary file in the target's folder
// and a rename, so an interrupted write never leaves a partial file behind.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "formats/gguf/gguf_value.h"

namespace kiln {

class GgufWriter {
public:
    // Sets a metadata key; a key set twice keeps its first position.
    void set(std::string key, GgufValue value);
    // Adds a tensor. `data` is borrowed until write(); its size must equal the
    // size of `dims` elements of `type` (checked).
    void add_tensor(std::string name, DType type, std::vector<uint64_t> dims, std::span<const std::byte> data);

    // Sets kTensorDataChecksumKey (gguf_checksum.h) to the CRC-32 of the
    // tensors added so far; call it after the last add_tensor().
    void add_tensor_data_checksum();

    // Writes atomically to `path`.
    void write(const std::filesystem::path& path) const;
    // The whole file as bytes (for tests and small files).
    std::vector<std::byte> to_bytes() const;

private:
    struct Entry {
        std::string key;
        GgufValue value;
    };
    struct Tensor {
        std::string name;
        DType type;
        std::vector<uint64_t> dims;
        std::span<const std::byte> data;
    };
    std::vector<Entry> metadata_;
    std::vector<Tensor> tensors_;

    uint64_t alignment() const;
    template <typename Sink>
    void serialize(Sink& sink) const;
};

}  // namespace kiln
