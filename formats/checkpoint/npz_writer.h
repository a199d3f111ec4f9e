#pragma once
// NumPy .npz files: a zip of .npy arrays (NumPy's format.py, version 1.0
// headers), stored uncompressed, that numpy.load(path, allow_pickle=False)
// reads: little-endian float32 arrays and Unicode string arrays ('<U', UTF-32
// code points), never pickled objects. Written through an AtomicFile, so the
// target holds a whole archive or nothing new.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class AtomicFile;
class ZipWriter;

class NpzWriter {
public:
    explicit NpzWriter(const std::filesystem::path& path);
    ~NpzWriter();
    NpzWriter(const NpzWriter&) = delete;
    NpzWriter& operator=(const NpzWriter&) = delete;

    // Array `name` (written as name.npy) of `shape`, C order; values.size()
    // must be the product of the shape.
    void add_float32(std::string_view name, std::span<const int64_t> shape, std::span<const float> values);
    // A 1-D Unicode array of UTF-8 strings (bytes that are not UTF-8 become U+FFFD).
    void add_strings(std::string_view name, std::span<const std::string> strings);
    // Finishes the archive and renames it over the target.
    void commit();

private:
    void add(std::string_view name, const std::string& descr, std::span<const int64_t> shape,
             std::span<const std::byte> data);

    std::unique_ptr<AtomicFile> file_;
    std::unique_ptr<ZipWriter> zip_;
};

// The header of a version 1.0 .npy file (magic, version, length, the dict
// padded so that the data starts on a 64-byte boundary).
std::string npy_header(const std::string& descr, std::span<const int64_t> shape);

// Code points of UTF-8 text; each invalid sequence (a stray byte, a cut or
// overlong form, a surrogate) becomes one U+FFFD.
std::u32string utf8_code_points(std::string_view text);

}  // namespace kiln
