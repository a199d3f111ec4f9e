#include "support/sample_gguf.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <random>


namespace kiln::test {

size_t find_text(const Bytes& bytes, std::string_view text) {
    const auto* begin = reinterpret_cast<const char*>(bytes.data());
    const std::string_view all(begin, bytes.size());
    const size_t at = all.find(text);
    INFO("looking for " << text);
    REQUIRE(at != std::string_view::npos);
    return at;
}

Bytes read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Bytes bytes(chars.size());
    if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
    return bytes;
}

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

TempDir::TempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(entropy()));
    std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace kiln::test
