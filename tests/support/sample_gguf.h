#pragma once
// Small GGUF files built in memory for tests: a valid sample that uses every
// metadata value type, and helpers to find and patch fields inside it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test {

using Bytes = std::vector<std::byte>;

// A valid GGUF v3 file holding all 13 value types (nested arrays included),
// general.alignment = 32, and tensors "tensor.a" (f32 [3, 2]), "tensor.b"
// (f16 [5]) and "tensor.q" (q8_0 [64]) with arbitrary bytes.
Bytes make_sample_gguf();

// Offset of the first occurrence of `text` in `bytes`; fails the test if absent.
size_t find_text(const Bytes& bytes, std::string_view text);

template <typename T>
void patch(Bytes& bytes, size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

template <typename T>
T peek(const Bytes& bytes, size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}

// Appends the little-endian encoding of plain values, for hand-built files.
struct ByteWriter {
    Bytes bytes;
    template <typename T>
    ByteWriter& put(T value) {
        const size_t at = bytes.size();
        bytes.resize(at + sizeof(T));
        std::memcpy(bytes.data() + at, &value, sizeof(T));
        return *this;
    }
    ByteWriter& str(std::string_view s) {
        put<uint64_t>(s.size());
        const size_t at = bytes.size();
        bytes.resize(at + s.size());
        if (!s.empty()) std::memcpy(bytes.data() + at, s.data(), s.size());
        return *this;
    }
};

Bytes read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);

// A fresh empty folder under the system temp folder, removed on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace kiln::test
