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
// high 2 bits at bit 2 e of qh[32 n + l], as ggml stores Q6_K. Whole blocks at
// a time: a code at a time, loading a 1.1B Q6_K file took 12.8 s.
constexpr int64_t kQ6BCodes = 288;

// All 256 codes of a plain block, in element order.
void q6_k_codes(const BlockQ6_K& b, uint8_t* codes) {
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const int low0 = b.ql[64 * n + l], low1 = b.ql[64 * n + 32 + l], high = b.qh[32 * n + l];
            codes[128 * n + l] = static_cast<uint8_t>((low0 & 0x0F) | (high & 3) << 4);
            codes[128 * n + 32 + l] = static_cast<uint8_t>((low1 & 0x0F) | (high >> 2 & 3) << 4);
            codes[128 * n + 64 + l] = static_cast<uint8_t>((low0 >> 4) | (high >> 4 & 3) << 4);
            codes[128 * n + 96 + l] = static_cast<uint8_t>((low1 >> 4) | (high >> 6) << 4);
        }
}

// The plain block's ql and qh from its 256 codes (the inverse of q6_k_codes).
void set_q6_k_codes(const uint8_t* codes, BlockQ6_K& b) {
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const int c0 = codes[128 * n + l], c1 = codes[128 * n + 32 + l], c2 = codes[128 * n + 64 + l],
                      c3 = codes[128 * n + 96 + l];
            b.ql[64 * n + l] = static_cast<uint8_t>((c0 & 0x0F) | (c2 & 0x0F) << 4);
            b.ql[64 * n + 32 + l] = static_cast<uint8_t>((c1 & 0x0F) | (c3 & 0x0F) << 4);
            b.qh[32 * n + l] = static_cast<uint8_t>(c0 >> 4 | (c1 >> 4) << 2 | (c2 >> 4) << 4 | (c3 >> 4) << 6);
        }
}

// Byte b of quad u (0..2) of sub-block s of row r in a group's super-block.
constexpr int64_t q6_k_r16b_at(int s, int u, int r, int b) { return kQ6BCodes + 64 * (3 * s + u) + 4 * r + b; }

void q6_k_r16b_put(const std::byte* block, int r, std::byte* out) {
    BlockQ6_K b;
    std::memcpy(&b, block, sizeof(b));
    copy_q6_k_header(r, [&](int64_t at, size_t from, size_t n) { std::memcpy(out + at, block + from, n); });
    uint8_t c[256];
    q6_k_codes(b, c);
    // Four codes to a 32-bit word: after a shift by less than 8, the mask keeps
    // bits 2u and 2u + 1 of each byte of the fourth quad, no bits of its neighbour.
    for (int s = 0; s < 16; ++s) {
        uint32_t words[4];
        std::memcpy(words, c + 16 * s, 16);
        for (int u = 0; u < 3; ++u) {
            const uint32_t quad = words[u] | ((words[3] >> (2 * u)) & 0x03030303u) << 6;
            std::memcpy(out + q6_k_r16b_at(s, u, r, 0), &quad, 4);
        }
    }
}

void q6_k_r16b_get(const std::byte* in, int r, std::byte* block) {
    uint8_t c[256];
    for (int s = 0; s < 16; ++s) {
        uint8_t quads[3][4];
        for (int u = 0; u < 3; ++u) std::memcpy(quads[u], in + q6_k_r16b_at(s, u, r, 0), 4);
        for (int i = 0; i < 4; ++i) {
            for (int u = 0; u < 3; ++u) c[16 * s + 4 * u + i] = quads[u][i] & 0x3F;
            c[16 * s + 12 + i] = static_cast<uint8_t>(quads[0][i] >> 6 | (quads[1][i] >> 6) << 2 | (quads[2][i] >> 6) << 4);
        }
    }
    BlockQ6_K b;
    set_q6_k_codes(c, b);
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
    const int64_t row_bytes = nb * block_bytes, group_bytes = group_block_bytes(plain);
    for (int64_t g = 0; g < rows / kInterleaveRows; ++g) {
        std::byte* group = dst + g * kInterleaveRows * row_bytes;
        for (int r = 0; r < kInterleaveRows; ++r) {
            const std::byte* row = src + (g * kInterleaveRows + r) * row_bytes;
            for (int64_t i = 0; i < nb; ++i) {
                const std::byte* block = row + i * block_bytes;
                std::byte* out = group + i * group_bytes;
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
