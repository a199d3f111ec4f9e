// libFuzzer entry for kiln --prompt-cache files (formats/session/prompt_cache.h).
// Every input first gets a correct trailing CRC-32, so that mutations reach
// the fields behind the checksum instead of stopping at it; the model's
// fingerprint and the cache shape are those of the seeds
// (tests/fuzz/corpus/prompt_cache/, written by tests/fuzz/make_prompt_cache_seeds.py).
// Anything but a result or "ignored" (a crash, a sanitizer report, an
// exception, a hang, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/io/crc32.h"
#include "formats/session/prompt_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
    if (bytes.size() >= 4) {
        const uint32_t crc = kiln::crc32(std::span(bytes).first(bytes.size() - 4));
        for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + static_cast<size_t>(i)] = static_cast<std::byte>(crc >> (8 * i));
    }
    const kiln::ModelFingerprint model{1000, 0x11223344u, 0x55667788u};
    const kiln::PromptCacheShape shape{2, 8, kiln::DType::F16, kiln::DType::F16, 32};
    std::string why_not;
    const auto cache = kiln::parse_prompt_cache(bytes, model, shape, 64, 512, why_not);
    if (cache && cache->rows.size() != 2 * cache->tokens.size() * shape.row_bytes) __builtin_trap();
    return 0;
}
