#include "engine/quant/interleave.h"

#include <cassert>
#include <cstring>
#include <utility>

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
void copy_q6_k_header(int r, Copy&& copy) {  // d and the scales
    copy(kQ6D + 2 * r, offsetof(BlockQ6_K, d), 2);
    for (int w = 0; w < 4; ++w) copy(kQ6Scales + 64 * w + 4 * r, offsetof(BlockQ6_K, scales) + 4 * w, 4);
}

template <class Copy>
void map_q6_k_block(int r, Copy&& copy) {
    copy_q6_k_header(r, copy);
    for (int q = 0; q < 32; ++q) copy(kQ6Low + 64 * q + 4 * r, offsetof(BlockQ6_K, ql) + 4 * q, 4);
    for (int q = 0; q < 16; ++q) copy(kQ6High + 64 * q + 4 * r, offsetof(BlockQ6_K, qh) + 4 * q, 4);
}

// Q6_K_R16B: d and scales where Q6_K_R16 has them; the codes whole (see
// interleave.h). Element 128 n + 32 e + l of a plain block (l < 32) has its low
// 4 bits in ql[64 n + 32 (e % 2) + l] (the high nibble when e >= 2) and its
// high 2 bits at bit 2 e of qh[32 n + l], as ggml stores Q6_K.
constexpr int64_t kQ6BCodes = 288;

int q6_k_code(const BlockQ6_K& b, int element) {
    const int n = element / 128, e = element % 128 / 32, l = element % 32;
    const int low = b.ql[64 * n + 32 * (e % 2) + l] >> (4 * (e / 2)) & 0x0F;
    return low | (b.qh[32 * n + l] >> (2 * e) & 3) << 4;
}

void set_q6_k_code(BlockQ6_K& b, int element, int code) {
    const int n = element / 128, e = element % 128 / 32, l = element % 32;
    uint8_t& low = b.ql[64 * n + 32 * (e % 2) + l];
    low = static_cast<uint8_t>((low & (0xF0 >> (4 * (e / 2)))) | (code & 0x0F) << (4 * (e / 2)));
    uint8_t& high = b.qh[32 * n + l];
    high = static_cast<uint8_t>((high & ~(3 << (2 * e))) | (code >> 4 & 3) << (2 * e));
}

// Byte b of quad u (0..2) of sub-block s of row r in a group's super-block.
constexpr int64_t q6_k_r16b_at(int s, int u, int r, int b) { return kQ6BCodes + 64 * (3 * s + u) + 4 * r + b; }

void q6_k_r16b_put(const std::byte* block, int r, std::byte* out) {
    BlockQ6_K b;
    std::memcpy(&b, block, sizeof(b));
    copy_q6_k_header(r, [&](int64_t at, size_t from, size_t n) { std::memcpy(out + at, block + from, n); });
    for (int s = 0; s < 16; ++s)
        for (int u = 0; u < 3; ++u)
            for (int i = 0; i < 4; ++i) {
                const int code = q6_k_code(b, 16 * s + 4 * u + i), fourth = q6_k_code(b, 16 * s + 12 + i);
                out[q6_k_r16b_at(s, u, r, i)] = static_cast<std::byte>(code | (fourth >> (2 * u) & 3) << 6);
            }
}

void q6_k_r16b_get(const std::byte* in, int r, std::byte* block) {
    BlockQ6_K b{};
    for (int s = 0; s < 16; ++s)
        for (int i = 0; i < 4; ++i) {
            int fourth = 0;
            for (int u = 0; u < 3; ++u) {
                const auto byte = static_cast<int>(in[q6_k_r16b_at(s, u, r, i)]);
                set_q6_k_code(b, 16 * s + 4 * u + i, byte & 0x3F);
                fourth |= (byte >> 6) << (2 * u);
            }
            set_q6_k_code(b, 16 * s + 12 + i, fourth);
        }
    std::memcpy(block, &b, sizeof(b));
    copy_q6_k_header(r, [&](int64_t at, size_t to, size_t n) { std::memcpy(block + to, in + at, n); });
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

// Q8_0_R16 and Q4_0_R16: per group and block of 32, the 16 fp16 d, then the
// code bytes as quads at 32 + 64 q + 4 r (8 quads for Q8_0, 4 for Q4_0).
template <class Copy>
void map_legacy_block(int quads, int r, Copy&& copy) {
    copy(2 * r, 0, 2);
    for (int q = 0; q < quads; ++q) copy(32 + 64 * q + 4 * r, 2 + 4 * q, 4);
}

// Calls map(r, copy) with the map of `type` (its plain block and group bytes).
template <class Copy>
void map_block(DType plain, int r, Copy&& copy) {
    switch (plain) {
        case DType::Q4_K: map_q4_k_block(r, copy); break;
        case DType::Q5_K: map_q5_k_block(r, copy); break;
        case DType::Q6_K: map_q6_k_block(r, copy); break;
        case DType::Q8_0: map_legacy_block(8, r, copy); break;
        default: map_legacy_block(4, r, copy); break;  // Q4_0
    }
}

int64_t group_block_bytes(DType plain) noexcept {
    return kInterleaveRows * static_cast<int64_t>(type_traits(plain).block_bytes);
}

}  // namespace

std::optional<DType> interleaved_type(DType plain) noexcept {
    for (const auto& [from, to] : kInterleavedLayouts)
        if (from == plain) return to;
    return std::nullopt;
}

bool is_interleaved(DType type) noexcept {
    for (const auto& layout : kInterleavedLayouts)
        if (layout.layout == type) return true;
    return false;
}

DType plain_type(DType interleaved) noexcept {
    for (const auto& [from, to] : kInterleavedLayouts)
        if (to == interleaved) return from;
    assert(false && "not an interleaved layout");
    return interleaved;
}

void interleave_rows(DType layout, const std::byte* src, int64_t rows, int64_t k, std::byte* dst) noexcept {
    const DType plain = plain_type(layout);
    assert(rows % kInterleaveRows == 0 && k % type_traits(plain).block_size == 0);
    const int64_t nb = k / type_traits(plain).block_size;
    const auto block_bytes = static_cast<int64_t>(type_traits(plain).block_bytes);
    const int64_t row_bytes = nb * block_bytes;
    for (int64_t g = 0; g < rows / kInterleaveRows; ++g) {
        std::byte* group = dst + g * kInterleaveRows * row_bytes;
        for (int r = 0; r < kInterleaveRows; ++r) {
            const std::byte* row = src + (g * kInterleaveRows + r) * row_bytes;
            for (int64_t i = 0; i < nb; ++i) {
                const std::byte* block = row + i * block_bytes;
                std::byte* out = group + i * group_block_bytes(plain);
                if (layout == DType::Q6_K_R16B) {
                    q6_k_r16b_put(block, r, out);
                    continue;
                }
                map_block(plain, r, [&](int64_t at, size_t from, size_t n) { std::memcpy(out + at, block + from, n); });
            }
        }
    }
}

void deinterleaved_block(DType interleaved, const std::byte* group, int64_t k, int r, int64_t i,
                         std::byte* block) noexcept {
    assert(is_interleaved(interleaved) && 0 <= r && r < kInterleaveRows && i < k / type_traits(plain_type(interleaved)).block_size);
    (void)k;
    const DType plain = plain_type(interleaved);
    const std::byte* in = group + i * group_block_bytes(plain);
    if (interleaved == DType::Q6_K_R16B) {
        q6_k_r16b_get(in, r, block);
        return;
    }
    map_block(plain, r, [&](int64_t at, size_t to, size_t n) { std::memcpy(block + to, in + at, n); });
}

}  // namespace kiln::quant
