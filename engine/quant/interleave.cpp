#include "engine/quant/interleave.h"

#include <cassert>
#include <cstring>

#include "engine/quant/blocks.h"

namespace kiln::quant {

namespace {

constexpr int64_t kQ4KGroupBlockBytes = kInterleaveRows * static_cast<int64_t>(sizeof(BlockQ4_K));
constexpr int64_t kD = 0, kDmin = 32, kScales = 64, kCodes = 256;
static_assert(kCodes + 32 * 64 == kQ4KGroupBlockBytes);

// Byte offsets, inside a group's super-block, of each byte of row r's plain
// block: the one map both directions use.
template <class Copy>
void map_q4_k_block(int r, Copy&& copy) {
    copy(kD + 2 * r, offsetof(BlockQ4_K, d), 2);
    copy(kDmin + 2 * r, offsetof(BlockQ4_K, dmin), 2);
    for (int w = 0; w < 3; ++w) copy(kScales + 64 * w + 4 * r, offsetof(BlockQ4_K, scales) + 4 * w, 4);
    for (int q = 0; q < 32; ++q) copy(kCodes + 64 * q + 4 * r, offsetof(BlockQ4_K, qs) + 4 * q, 4);
}

}  // namespace

std::optional<DType> interleaved_type(DType plain) noexcept {
    if (plain == DType::Q4_K) return DType::Q4_K_R16;
    return std::nullopt;
}

bool is_interleaved(DType type) noexcept { return type == DType::Q4_K_R16; }

DType plain_type(DType interleaved) noexcept {
    assert(is_interleaved(interleaved));
    (void)interleaved;
    return DType::Q4_K;
}

void interleave_rows(DType plain, const std::byte* src, int64_t rows, int64_t k, std::byte* dst) noexcept {
    assert(plain == DType::Q4_K && rows % kInterleaveRows == 0 && k % kQK_K == 0);
    (void)plain;
    const int64_t nb = k / kQK_K;
    const int64_t row_bytes = nb * static_cast<int64_t>(sizeof(BlockQ4_K));
    for (int64_t g = 0; g < rows / kInterleaveRows; ++g) {
        std::byte* group = dst + g * kInterleaveRows * row_bytes;
        for (int r = 0; r < kInterleaveRows; ++r) {
            const std::byte* row = src + (g * kInterleaveRows + r) * row_bytes;
            for (int64_t i = 0; i < nb; ++i) {
                const std::byte* block = row + i * static_cast<int64_t>(sizeof(BlockQ4_K));
                std::byte* out = group + i * kQ4KGroupBlockBytes;
                map_q4_k_block(r, [&](int64_t at, size_t from, size_t n) { std::memcpy(out + at, block + from, n); });
            }
        }
    }
}

void deinterleaved_block(DType interleaved, const std::byte* group, int64_t k, int r, int64_t i,
                         std::byte* block) noexcept {
    assert(interleaved == DType::Q4_K_R16 && 0 <= r && r < kInterleaveRows && i < k / kQK_K);
    (void)interleaved;
    (void)k;
    const std::byte* in = group + i * kQ4KGroupBlockBytes;
    map_q4_k_block(r, [&](int64_t at, size_t to, size_t n) { std::memcpy(block + to, in + at, n); });
}

}  // namespace kiln::quant
