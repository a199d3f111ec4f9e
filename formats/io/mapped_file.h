#pragma once
// A read-only memory mapping of a whole file. Weights are used straight from it.
#include <cstddef>
#include <filesystem>
#include <span>

namespace kiln {

class MappedFile {
public:
    // Throws kiln::Error ("[io] ...") when the file cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

private:
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace kiln
