#pragma once
// The size a PNG file says it has (its IHDR chunk), read without a PNG library:
// enough to tell that a tool wrote a whole picture of the expected size. The
// pixels are checked by tests/viz/check_png.py (Pillow).
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

namespace kiln::test {

struct PngSize {
    uint32_t width = 0, height = 0;
};

// nullopt when the file is missing or does not start with the PNG signature and an IHDR chunk.
inline std::optional<PngSize> png_size(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::array<unsigned char, 24> head{};
    if (!in.read(reinterpret_cast<char*>(head.data()), head.size())) return std::nullopt;
    static constexpr std::array<unsigned char, 16> kStart{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                                          0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (size_t i = 0; i < kStart.size(); ++i)
        if (head[i] != kStart[i]) return std::nullopt;
    const auto be32 = [&](size_t at) {
        return uint32_t{head[at]} << 24 | uint32_t{head[at + 1]} << 16 | uint32_t{head[at + 2]} << 8 | head[at + 3];
    };
    return PngSize{be32(16), be32(20)};
}

}  // namespace kiln::test
