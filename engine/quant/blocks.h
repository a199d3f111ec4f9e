#pragma once
// The byte layouts of kiln's block-quantized types, identical to ggml's
// (ggml-common.h) so GGUF tensor data can be used in place.
//
// Blocks are packed back to back in a tensor and a block is 34 or 18 bytes, so
// inside a GGUF file (only 32-byte aligned as a whole) most blocks are not
// 2-byte aligned: read and write them with memcpy, not by casting a pointer.
#include <cstdint>

namespace kiln::quant {

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

}  // namespace kiln::quant
