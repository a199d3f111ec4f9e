#include "formats/gguf/not_gguf.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "engine/core/printable.h"

namespace kiln {

namespace {

[[noreturn]] void convert_first(const std::filesystem::path& path, std::string_view what) {
    const std::string name = printable(path.string());
    fail("gguf", "{} is {}, not a GGUF file: convert it first: kiln-convert {} -o model.gguf", name, what, name);
}

bool starts_with(std::span<const std::byte> bytes, std::string_view prefix) {
    return bytes.size() >= prefix.size() && std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

// safetensors: an 8-byte little-endian header length, then the JSON header.
bool looks_like_safetensors(std::span<const std::byte> bytes) {
    return bytes.size() >= 9 && static_cast<char>(bytes[8]) == '{';
}

std::string lower_extension(const std::filesystem::path& path) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext;
}

}  // namespace

void refuse_folder_as_gguf(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) convert_first(path, "a folder (a Hugging Face checkpoint?)");
}

void refuse_checkpoint_as_gguf(const std::filesystem::path& path, std::span<const std::byte> bytes) {
    if (starts_with(bytes, "GGUF")) return;
    const std::string ext = lower_extension(path);
    if (ext == ".safetensors" || (ext != ".bin" && looks_like_safetensors(bytes)))
        convert_first(path, "a safetensors file");
    if (ext == ".pt" || ext == ".pth" || starts_with(bytes, "PK\x03\x04")) convert_first(path, "a PyTorch checkpoint");
    if (ext == ".bin") convert_first(path, "a .bin checkpoint (llama2.c or PyTorch)");
}

}  // namespace kiln
