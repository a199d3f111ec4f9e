#pragma once
// The byte layouts of kiln's block-quantized types, identical to ggml's
// (ggml-common.h) so GGUF tensor data can be used in place.
//
// Blocks are packed back to back in a tensor and a block is 34 or 18 bytes, so
// inside a GGUF file (only 32-byte aligned as a whole) most blocks are not
// 2-byte aligned: read and write them with memcpy, not by casting a pointer.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln::quant {

// Block `index` of a tensor's data (any alignment), and the way back.
template <class Block>
inline Block load_block(const void* data, int64_t index) noexcept {
    Block block;
    std::memcpy(&block, static_cast<const std::byte*>(data) + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    return block;
}
template <class Block>
inline void store_block(void* data, int64_t index, const Block& block) noexcept {
    std::memcpy(static_cast<std::byte*>(data) + index * static_cast<int64_t>(sizeof(Block)), &block, sizeof(Block));
}

inline constexpr int64_t kQK8_0 = 32;  // elements per Q8_0 block
inline constexpr int64_t kQK4_0 = 32;  // elements per Q4_0 block

// 32 signed 8-bit codes sharing one scale: x[j] ~ qs[j] * d.
struct BlockQ8_0 {
    uint16_t d;           // scale, an fp16 bit pattern
    int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must match ggml's block_q8_0");

// 32 unsigned 4-bit codes with an offset of 8 sharing one scale. Byte j holds
// element j in its low nibble and element j + 16 in its high nibble:
// x[j] ~ ((qs[j] & 0xF) - 8) * d,  x[j + 16] ~ ((qs[j] >> 4) - 8) * d.
struct BlockQ4_0 {
    uint16_t d;           // scale, an fp16 bit pattern
    uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must match ggml's block_q4_0");

// ------------------------------------------------------------------ 32-blocks
// The other legacy types. Nibble order as in Q4_0: byte j holds element j (low
// nibble) and element j + 16 (high nibble). Q5 types keep each element's fifth
// bit in qh (bit j of the little-endian 32-bit word qh is element j's).

inline constexpr int64_t kQK4_1 = 32;
inline constexpr int64_t kQK5_0 = 32;
inline constexpr int64_t kQK5_1 = 32;
inline constexpr int64_t kQK8_1 = 32;
inline constexpr int64_t kQK4_NL = 32;

// x ~ q * d + m, q in [0, 15].
struct BlockQ4_1 {
    uint16_t d;  // fp16 scale
    uint16_t m;  // fp16 minimum
    uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must match ggml's block_q4_1");

// x ~ (q - 16) * d, q in [0, 31].
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must match ggml's block_q5_0");

// x ~ q * d + m, q in [0, 31].
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must match ggml's block_q5_1");

// The activation type of Q4_1/Q5_1 dot products: Q8_0 plus s = d * sum(qs),
// which carries the weights' minimum term.
struct BlockQ8_1 {
    uint16_t d;  // fp16 scale
    uint16_t s;  // fp16 of d * sum(qs)
    int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block must match ggml's block_q8_1");

// IQ4_NL: 4-bit codes indexing a fixed non-linear table of 16 int8 values
// (kIQ4NLValues), x ~ d * table[q]. Nibble order as Q4_0.
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block must match ggml's block_iq4_nl");

// ggml's kvalues_iq4nl.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ---------------------------------------------------------- K-quants (QK_K = 256)
// A super-block of 256 elements in sub-blocks of 16 or 32, with the sub-block
// scales themselves quantized against one or two fp16 super-scales.

inline constexpr int64_t kQK_K = 256;
inline constexpr int64_t kKScaleSize = 12;  // 8 six-bit scales + 8 six-bit mins (Q4_K, Q5_K)

// 16 sub-blocks of 16: scales[i] low nibble = 4-bit scale, high nibble = 4-bit min;
// x ~ d * (scales & 15) * q - dmin * (scales >> 4), q in [0, 3] (2 bits in qs).
struct BlockQ2_K {
    uint8_t scales[kQK_K / 16];
    uint8_t qs[kQK_K / 4];
    uint16_t d;
    uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must match ggml's block_q2_K");

// 16 sub-blocks of 16 with 6-bit signed scales (packed in 12 bytes);
// codes are 2 low bits in qs and a high bit in hmask (set = no -4 offset).
struct BlockQ3_K {
    uint8_t hmask[kQK_K / 8];
    uint8_t qs[kQK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must match ggml's block_q3_K");

// 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes;
// x ~ d * sc * q - dmin * m, q in [0, 15].
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleSize];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must match ggml's block_q4_K");

// As Q4_K with a fifth bit per element in qh; q in [0, 31].
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleSize];
    uint8_t qh[kQK_K / 8];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must match ggml's block_q5_K");

// 16 sub-blocks of 16 with int8 scales; x ~ d * scales * (q - 32), q in [0, 63]
// (4 low bits in ql, 2 high bits in qh).
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must match ggml's block_q6_K");

// The activation type of K-quant dot products: a float scale, 256 int8 codes
// and the sums of each 16 codes (the min terms need them).
struct BlockQ8_K {
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must match ggml's block_q8_K");

// IQ4_XS: IQ4_NL's table with 8 sub-blocks of 32, each with a 6-bit scale
// (low 4 bits in scales_l, high 2 bits in scales_h), offset by 32.
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQK_K / 64];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block must match ggml's block_iq4_xs");

}  // namespace kiln::quant
