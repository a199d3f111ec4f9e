#pragma once
// Interleaved weight layouts: 16 rows of a quantized matrix stored together so
// that a SIMD kernel finds the same bytes of 16 rows in one vector (rows in
// lanes). Decoding then shares every activation load, scale decode and
// instruction among 16 rows instead of paying them per row.
//
// Q4_K_R16: per group of 16 rows, per super-block i (16 x 144 = 2304 bytes, the
// same size as the 16 plain blocks):
//   [0, 32)      the 16 rows' fp16 d
//   [32, 64)     the 16 rows' fp16 dmin
//   [64, 256)    the 12 packed scale bytes as three 32-bit words, word w of
//                row r at 64 + 64 w + 4 r
//   [256, 2304)  the 128 code bytes as 32 quads, quad q (bytes 4q..4q+3 of the
//                block's qs) of row r at 256 + 64 q + 4 r
// Q5_K_R16 is Q4_K_R16 with the 32 qh bytes as 8 quads at [256, 768) and the
// codes at [768, 2816).
// Q6_K_R16 likewise (16 x 210 bytes): the 16 rows' fp16 d at [0, 32), the 16
// int8 scales as four words at [32, 288), the 128 ql bytes as 32 quads at
// [288, 2336) and the 64 qh bytes as 16 quads at [2336, 3360).
// Q6_K_R16B (16 x 210 bytes): d and scales as in Q6_K_R16, then at 288 the
// 256 codes c (0..63, element order) of each row as 48 quads: per sub-block s
// of 16 elements, quads u = 0, 1, 2 of row r at 288 + 64 (3 s + u) + 4 r, byte
// b of quad u holding c[16 s + 4 u + b] in its low 6 bits and bits 2u, 2u + 1
// of c[16 s + 12 + b] in its top 2. An AVX2 kernel then gets three code
// vectors with one AND each and the fourth with a few shifts, against two
// shifts, two ANDs and an OR per vector for Q6_K_R16's split low and high bits.
// Q8_0_R16 and Q4_0_R16, per block of 32 (16 x 34 or 16 x 18 bytes): the 16
// rows' fp16 d at [0, 32), then the code bytes as quads at 32 + 64 q + 4 r.
// Groups follow each other; group g starts where plain row 16 g starts, so a
// view of whole groups keeps its address arithmetic.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/core/dtype.h"

namespace kiln::quant {

inline constexpr int64_t kInterleaveRows = 16;

// The interleaved layouts, each with the plain type it holds.
struct InterleavedLayout {
    DType plain, layout;
};
inline constexpr InterleavedLayout kInterleavedLayouts[] = {
    {DType::Q4_0, DType::Q4_0_R16}, {DType::Q8_0, DType::Q8_0_R16}, {DType::Q4_K, DType::Q4_K_R16},
    {DType::Q5_K, DType::Q5_K_R16}, {DType::Q6_K, DType::Q6_K_R16}, {DType::Q6_K, DType::Q6_K_R16B},
};

// The 16-row interleaved layout of a plain type (Q6_K: Q6_K_R16), if kiln has one.
std::optional<DType> interleaved_type(DType plain) noexcept;
// Whether `type` is an interleaved layout, and the plain type it holds.
bool is_interleaved(DType type) noexcept;
DType plain_type(DType interleaved) noexcept;

// Rearranges `rows` plain rows of k elements (rows a multiple of 16) from src
// into dst in the interleaved layout `layout` (the same number of bytes; src
// and dst must not overlap).
void interleave_rows(DType layout, const std::byte* src, int64_t rows, int64_t k, std::byte* dst) noexcept;

// Writes plain super-block i of row r (0..15) of the 16-row group at `group`,
// whose rows hold k elements, to `block` (the plain type's block bytes).
void deinterleaved_block(DType interleaved, const std::byte* group, int64_t k, int r, int64_t i,
                         std::byte* block) noexcept;

}  // namespace kiln::quant
