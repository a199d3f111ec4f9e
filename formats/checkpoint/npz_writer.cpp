#include "formats/checkpoint/npz_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "formats/checkpoint/zip_writer.h"
#include "formats/io/atomic_file.h"

namespace kiln {

std::string npy_header(const std::string& descr, std::span<const int64_t> shape) {
    std::string dims;
    for (int64_t d : shape) dims += fmt::format("{}, ", d);
    if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (2, 3) has none
    else if (shape.size() == 1) dims.pop_back();
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
    // magic (6) + version (2) + length (2) + dict + '\n', a multiple of 64.
    const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
    dict.append(total - 10 - dict.size() - 1, ' ');
    dict += '\n';
    std::string header("\x93NUMPY\x01\x00", 8);
    header += static_cast<char>(dict.size() & 0xff);
    header += static_cast<char>(dict.size() >> 8);
    return header + dict;
}

std::u32string utf8_code_points(std::string_view text) {
    std::u32string out;
    size_t i = 0;
    while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        int length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
        char32_t cp = length == 1 ? b : length == 2 ? b & 0x1f : length == 3 ? b & 0x0f : b & 0x07;
        int taken = 1;
        bool ok = length > 0;
        for (; ok && taken < length; ++taken) {
            if (i + static_cast<size_t>(taken) >= text.size()) {
                ok = false;
                break;
            }
            const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(taken)]);
            if ((c >> 6) != 0x2) {
                ok = false;
                break;
            }
            cp = cp << 6 | (c & 0x3f);
        }
        // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
        if (ok && ((length == 2 && cp < 0x80) || (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000) ||
                   (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
            ok = false;
        out += ok ? cp : U'\uFFFD';
        i += ok ? static_cast<size_t>(length) : static_cast<size_t>(std::max(taken, 1));
    }
    return out;
}

NpzWriter::NpzWriter(const std::filesystem::path& path)
    : file_(std::make_unique<AtomicFile>(path)), zip_(std::make_unique<ZipWriter>(*file_)) {}

NpzWriter::~NpzWriter() = default;

void NpzWriter::add(std::string_view name, const std::string& descr, std::span<const int64_t> shape,
                    std::span<const std::byte> data) {
    const std::string header = npy_header(descr, shape);
    std::vector<std::byte> bytes(header.size() + data.size());
    std::memcpy(bytes.data(), header.data(), header.size());
    if (!data.empty()) std::memcpy(bytes.data() + header.size(), data.data(), data.size());
    zip_->add(fmt::format("{}.npy", name), bytes);
}

void NpzWriter::add_float32(std::string_view name, std::span<const int64_t> shape, std::span<const float> values) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (count != static_cast<int64_t>(values.size()))
        fail("npz", "array '{}': shape holds {} values, {} given", name, count, values.size());
    add(name, "<f4", shape, std::as_bytes(values));  // kiln runs on little-endian machines only
}

void NpzWriter::add_strings(std::string_view name, std::span<const std::string> strings) {
    std::vector<std::u32string> points;
    size_t width = 1;  // numpy has no '<U0'
    for (const std::string& s : strings) {
        points.push_back(utf8_code_points(s));
        width = std::max(width, points.back().size());
    }
    std::vector<char32_t> cells(width * strings.size(), 0);
    for (size_t i = 0; i < points.size(); ++i) std::copy(points[i].begin(), points[i].end(), cells.begin() + i * width);
    const int64_t shape[] = {static_cast<int64_t>(strings.size())};
    add(name, fmt::format("<U{}", width), shape, std::as_bytes(std::span(cells)));
}

void NpzWriter::commit() {
    zip_->finish();
    file_->commit();
}

}  // namespace kiln
