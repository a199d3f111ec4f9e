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

// Q6_K_R16: per group and super-block (16 x 210 bytes): the 16 fp16 d, the 16
// int8 scales as four words (word w of row r at 32 + 64 w + 4 r), the 128 ql
// bytes as 32 quads (at 288 + 64 q + 4 r), the 64 qh bytes as 16 quads (at
// 2336 + 64 q + 4 r).
constexpr int64_t kQ6KGroupBlockBytes = kInterleaveRows * static_cast<int64_t>(sizeof(BlockQ6_K));
constexpr int64_t kQ6D = 0, kQ6Scales = 32, kQ6Low = 288, kQ6High = 2336;
static_assert(kQ6High + 16 * 64 == kQ6KGroupBlockBytes);

template <class Copy>
void map_q6_k_block(int r, Copy&& copy) {
    copy(kQ6D + 2 * r, offsetof(BlockQ6_K, d), 2);
    for (int w = 0; w < 4; ++w) copy(kQ6Scales + 64 * w + 4 * r, offsetof(BlockQ6_K, scales) + 4 * w, 4);
    for (int q = 0; q < 32; ++q) copy(kQ6Low + 64 * q + 4 * r, offsetof(BlockQ6_K, ql) + 4 * q, 4);
    for (int q = 0; q < 16; ++q) copy(kQ6High + 64 * q + 4 * r, offsetof(BlockQ6_K, qh) + 4 * q, 4);
}

// Q5_K_R16: as Q4_K_R16 with the 32 qh bytes as 8 quads at 256 + 64 q + 4 r,
// the codes after them at 768.
constexpr int64_t kQ5KGroupBlockBytes = kInterleaveRows * static_cast<int64_t>(sizeof(BlockQ5_K));
constexpr int64_t kQ5High = 256, kQ5Codes = 768;
static_assert(kQ5Codes + 32 * 64 == kQ5KGroupBlockBytes);

template <class Copy>
void map_q5_k_block(int r, Copy&& copy) {
    copy(kD + 2 * r, offsetof(BlockQ5_K, d), 2);
    copy(kDmin + 2 * r, offsetof(BlockQ5_K, dmin), 2);
    for (int w = 0; w < 3; ++w) copy(kScales + 64 * w + 4 * r, offsetof(BlockQ5_K, scales) + 4 * w, 4);
    for (int q = 0; q < 8; ++q) copy(kQ5High + 64 * q + 4 * r, offsetof(BlockQ5_K, qh) + 4 * q, 4);
    for (int q = 0; q < 32; ++q) copy(kQ5Codes + 64 * q + 4 * r, offsetof(BlockQ5_K, qs) + 4 * q, 4);
}

// Calls map(r, copy) with the map of `type` (its plain block and group bytes).
template <class Copy>
void map_block(DType plain, int r, Copy&& copy) {
    if (plain == DType::Q4_K) map_q4_k_block(r, copy);
    else if (plain == DType::Q5_K) map_q5_k_block(r, copy);
    else map_q6_k_block(r, copy);
}

int64_t group_block_bytes(DType plain) noexcept {
    return plain == DType::Q4_K ? kQ4KGroupBlockBytes : plain == DType::Q5_K ? kQ5KGroupBlockBytes : kQ6KGroupBlockBytes;
}

}  // namespace

std::optional<DType> interleaved_type(DType plain) noexcept {
    if (plain == DType::Q4_K) return DType::Q4_K_R16;
    if (plain == DType::Q5_K) return DType::Q5_K_R16;
    if (plain == DType::Q6_K) return DType::Q6_K_R16;
    return std::nullopt;
}

bool is_interleaved(DType type) noexcept {
    return type == DType::Q4_K_R16 || type == DType::Q5_K_R16 || type == DType::Q6_K_R16;
}

DType plain_type(DType interleaved) noexcept {
    assert(is_interleaved(interleaved));
    return interleaved == DType::Q4_K_R16 ? DType::Q4_K : interleaved == DType::Q5_K_R16 ? DType::Q5_K : DType::Q6_K;
}

void interleave_rows(DType plain, const std::byte* src, int64_t rows, int64_t k, std::byte* dst) noexcept {
    assert(interleaved_type(plain) && rows % kInterleaveRows == 0 && k % kQK_K == 0);
    const int64_t nb = k / kQK_K;
    const auto block_bytes = static_cast<int64_t>(type_traits(plain).block_bytes);
    const int64_t row_bytes = nb * block_bytes;
    for (int64_t g = 0; g < rows / kInterleaveRows; ++g) {
        std::byte* group = dst + g * kInterleaveRows * row_bytes;
        for (int r = 0; r < kInterleaveRows; ++r) {
            const std::byte* row = src + (g * kInterleaveRows + r) * row_bytes;
            for (int64_t i = 0; i < nb; ++i) {
                const std::byte* block = row + i * block_bytes;
                std::byte* out = group + i * group_block_bytes(plain);
                map_block(plain, r, [&](int64_t at, size_t from, size_t n) { std::memcpy(out + at, block + from, n); });
            }
        }
    }
}

void deinterleaved_block(DType interleaved, const std::byte* group, int64_t k, int r, int64_t i,
                         std::byte* block) noexcept {
    assert(is_interleaved(interleaved) && 0 <= r && r < kInterleaveRows && i < k / kQK_K);
    (void)k;
    const DType plain = plain_type(interleaved);
    const std::byte* in = group + i * group_block_bytes(plain);
    map_block(plain, r, [&](int64_t at, size_t to, size_t n) { std::memcpy(block + to, in + at, n); });
}

}  // namespace kiln::quant
