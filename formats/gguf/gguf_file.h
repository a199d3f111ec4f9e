#pragma once
// Reading GGUF v2/v3 files. The file is memory-mapped; metadata is parsed into
// values, and every tensor is exposed as a zero-copy view into the mapping.
// Every count, length, shape product, offset and size is validated against
// overflow and the file's size before it is used, so a malformed or truncated
// file gives a kiln::Error naming the file, the problem and the byte offset.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "formats/gguf/gguf_value.h"

namespace kiln {

class MappedFile;

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensor {
    std::string name;
    DType type = DType::F32;
    std::vector<uint64_t> dims;      // ggml order: dims[0] is the row length (fastest varying)
    uint64_t offset = 0;             // from the start of the data section
    uint64_t elements = 0;
    std::span<const std::byte> data; // exactly the tensor's bytes, inside the mapping
};

struct GgufEntry {
    std::string key;
    GgufValue value;
};

class GgufFile {
public:
    // Move-only: the lookup indexes hold views of names stored inside.
    GgufFile(GgufFile&&) noexcept = default;
    GgufFile& operator=(GgufFile&&) noexcept = default;
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    // Maps and parses a file. Throws kiln::Error on any problem.
    static GgufFile open(const std::filesystem::path& path);
    // Parses bytes owned by the caller (they must outlive the result); `name`
    // is used in error messages.
    static GgufFile parse(std::span<const std::byte> bytes, std::string name);

    const std::string& name() const noexcept { return name_; }
    uint32_t version() const noexcept { return version_; }
    uint64_t alignment() const noexcept { return alignment_; }
    uint64_t data_offset() const noexcept { return data_offset_; }
    uint64_t file_size() const noexcept { return bytes_.size(); }
    std::span<const std::byte> bytes() const noexcept { return bytes_; }
    // Whether the bytes are this file's mapping (open) rather than the caller's (parse).
    bool is_mapped() const noexcept { return mapping_ != nullptr; }

    const std::vector<GgufEntry>& metadata() const noexcept { return metadata_; }
    const GgufValue* find(std::string_view key) const noexcept;
    const std::vector<GgufTensor>& tensors() const noexcept { return tensors_; }
    const GgufTensor* find_tensor(std::string_view name) const noexcept;

    // Typed lookups that throw a clear error naming the key when it is missing
    // or has the wrong type.
    std::string get_string(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    double get_number(std::string_view key) const;
    const GgufTensor& get_tensor(std::string_view name) const;

private:
    GgufFile() = default;

    std::shared_ptr<const MappedFile> mapping_;  // null when parsing borrowed bytes
    std::span<const std::byte> bytes_;
    std::string name_;
    uint32_t version_ = 0;
    uint64_t alignment_ = kGgufDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<GgufEntry> metadata_;
    std::unordered_map<std::string_view, size_t> metadata_index_;  // views into metadata_ keys
    std::vector<GgufTensor> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;

    friend class GgufParser;
};

}  // namespace kiln
