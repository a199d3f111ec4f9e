// The int8 kernels of the "avx512-vnni" set: Q8_0 and Q4_0 weights against
// Q8_0-prepared activations, with `vpdpbusd`.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, four per 32-bit lane, and
// adds into the lane. Both operands here are signed, so one side is offset to
// unsigned by adding 128 (x ^ 0x80 is x + 128 as an unsigned byte) or, for Q4_0
// codes q in [0, 15] holding w = q - 8, used as is (offset 8); the surplus
// offset * (sum of the other side's codes) is known per block and is put into
// the accumulator before the dot product starts. The int32 block sums are
// therefore exact, as in the scalar set; only the float sum over blocks is
// ordered differently.
//
// Decode (few tokens) streams the weights once, kDotRows rows at a time, in
// units that fill a 512-bit vector (2 Q8_0 blocks, or 4 Q4_0 blocks as low and
// high nibbles); the activation blocks are pre-arranged once per call to match
// (codes, per-lane correction, per-lane scale), so per row and unit the inner
// loop is the loads and inserts, the offset or nibble masks, vpdpbusd, one
// convert, one permute and one FMA. Weight scales are gathered 16 blocks at a
// time (and, for one token, multiplied by its 16 scales) and spread to each
// unit's lanes with that permute instead of being converted one by one.
//
// Prompt processing (many tokens) runs a GEMM with rows in lanes: a panel of 32
// weight rows is packed per block as eight 4-byte quads x 16 rows (the u8 side)
// plus the 32 row scales, activations are packed in tiles of kTokens tokens,
// and the micro-kernel broadcasts one quad of a token's codes (the s8 side)
// against two packed vectors: each packed weight byte meets every token of the
// tile, and 2 x kTokens int32 and float accumulators stay in registers.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/simd.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <utility>


namespace kiln::kernels::detail {
namespace {

template <DType W>
constexpr int64_t kBlockBytes = W == DType::Q8_0 ? 34 : 18;
constexpr int64_t kXBlockBytes = 34;  // a prepared Q8_0 activation block

inline float half_at(const std::byte* p) noexcept {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// ---------------------------------------------------------------- decode path

constexpr int kDotRows = 4;
constexpr int64_t kPrefetchBytes = 8192;
constexpr int kDotTokens = 4;

// The decode kernel works on units of blocks that fill one 512-bit vector of
// int32 lanes, each lane belonging to one block:
//  * Q8_0: 2 blocks, 8 lanes each: [codes of block 0 | codes of block 1].
//  * Q4_0: 4 blocks, 4 lanes each, as two vectors: the low nibbles (elements
//    0-15) of the 4 blocks side by side, and the high nibbles (16-31). Both
//    vpdpbusd into the same lanes, and the nibbles need no interleaving: a
//    block's 16 code bytes are loaded once and masked / shifted.
// Activations are arranged per unit to match: the codes in the same lane
// order, a per-lane correction (-offset * block sum / lanes per block) and a
// per-lane scale; then, after all units, the block scales once more, one float
// per block padded to a multiple of 16 (the one-token kernel folds them into
// the weight scales).
template <DType W>
struct DotUnit {
    static constexpr int64_t kBlocks = W == DType::Q8_0 ? 2 : 4;
    static constexpr int64_t kCodeVectors = W == DType::Q8_0 ? 1 : 2;
    static constexpr int64_t kCorr = kCodeVectors * 64, kScale = kCorr + 64, kBytes = kScale + 64;
    // Weight codes are offset to unsigned by 128 (Q8_0) or 8 (Q4_0), spread
    // over the lanes of a block.
    static constexpr int32_t kCorrPerLane = W == DType::Q8_0 ? 128 / 8 : 8 / 4;
};

template <DType W>
inline int64_t units_bytes(int64_t nb) noexcept {
    return (nb + DotUnit<W>::kBlocks - 1) / DotUnit<W>::kBlocks * DotUnit<W>::kBytes;
}
template <DType W>
inline int64_t arranged_row_bytes(int64_t nb) noexcept {
    return units_bytes<W>(nb) + static_cast<int64_t>(round_up(static_cast<size_t>(nb), 16)) * 4;
}

// The 16 codes of half `h` (0: elements 0-15, 1: 16-31) of an activation block,
// or zeros past the end of the row.
inline __m128i x_half(const std::byte* x, int64_t nb, int64_t b, int h) noexcept {
    return b < nb ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + b * kXBlockBytes + 2 + 16 * h))
                  : _mm_setzero_si128();
}

template <DType W>
void arrange_units(const std::byte* x, int64_t nb, std::byte* dst) noexcept {
    using U = DotUnit<W>;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t u = 0; u * U::kBlocks < nb; ++u) {
        const int64_t b0 = u * U::kBlocks;
        std::byte* d = dst + u * U::kBytes;
        __m512i corr;
        __m512 scale;
        const auto dx = [&](int64_t b) { return b < nb ? half_at(x + b * kXBlockBytes) : 0.0f; };
        if constexpr (W == DType::Q8_0) {
            const __m256i lo = _mm256_set_m128i(x_half(x, nb, b0, 1), x_half(x, nb, b0, 0));
            const __m256i hi = _mm256_set_m128i(x_half(x, nb, b0 + 1, 1), x_half(x, nb, b0 + 1, 0));
            const __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            _mm512_store_si512(d, codes);
            const __m512i sums4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, codes);  // sums of 4 codes
            const int32_t s0 = _mm512_mask_reduce_add_epi32(0x00FF, sums4);
            const int32_t s1 = _mm512_mask_reduce_add_epi32(0xFF00, sums4);
            corr = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(-U::kCorrPerLane * s0),
                                           _mm512_set1_epi32(-U::kCorrPerLane * s1));
            scale = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(dx(b0)), _mm512_set1_ps(dx(b0 + 1)));
        } else {
            __m512i halves[2];
            for (int h = 0; h < 2; ++h) {
                const __m256i a = _mm256_set_m128i(x_half(x, nb, b0 + 1, h), x_half(x, nb, b0, h));
                const __m256i b = _mm256_set_m128i(x_half(x, nb, b0 + 3, h), x_half(x, nb, b0 + 2, h));
                halves[h] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
                _mm512_store_si512(d + 64 * h, halves[h]);
            }
            // Sums of 8 codes per lane, then the total of each 4-lane block in every lane.
            __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, halves[0]), ones,
                                               halves[1]);
            sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_CDAB));
            sums = _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, _MM_PERM_BADC));
            corr = _mm512_mullo_epi32(sums, _mm512_set1_epi32(-U::kCorrPerLane));
            scale = _mm512_setr_ps(dx(b0), dx(b0), dx(b0), dx(b0), dx(b0 + 1), dx(b0 + 1), dx(b0 + 1), dx(b0 + 1),
                                   dx(b0 + 2), dx(b0 + 2), dx(b0 + 2), dx(b0 + 2), dx(b0 + 3), dx(b0 + 3), dx(b0 + 3),
                                   dx(b0 + 3));
        }
        _mm512_store_si512(d + U::kCorr, corr);
        _mm512_store_ps(d + U::kScale, scale);
    }
    auto* scales = reinterpret_cast<float*>(dst + units_bytes<W>(nb));
    for (int64_t b = 0; b < static_cast<int64_t>(round_up(static_cast<size_t>(nb), 16)); ++b)
        scales[b] = b < nb ? half_at(x + b * kXBlockBytes) : 0.0f;
}

// One unit of weight blocks as the u8 operand(s); `present` blocks exist.
template <DType W>
struct WeightUnit {
    __m512i v[DotUnit<W>::kCodeVectors];
};

template <DType W>
inline WeightUnit<W> load_weight_unit(const std::byte* p, int64_t present) noexcept {
    WeightUnit<W> u;
    if constexpr (W == DType::Q8_0) {
        // Codes + 128: flipping the sign bit.
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        const __m256i hi =
            present > 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 36)) : _mm256_setzero_si256();
        u.v[0] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(-128));
    } else {
        const auto q = [&](int64_t i) {
            return i < present ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * 18 + 2))
                               : _mm_setzero_si128();
        };
        const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(q(0)), q(1), 1);
        const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(q(2)), q(3), 1);
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        u.v[0] = _mm512_and_si512(both, low4);
        u.v[1] = _mm512_and_si512(_mm512_srli_epi16(both, 4), low4);
    }
    return u;
}

// The int32 lanes of one weight unit against one arranged activation unit,
// offset correction included: exact partial block sums.
template <DType W>
inline __m512i dot_unit(const WeightUnit<W>& wu, const std::byte* xu) noexcept {
    __m512i p = _mm512_load_si512(xu + DotUnit<W>::kCorr);
    for (int64_t i = 0; i < DotUnit<W>::kCodeVectors; ++i)
        p = _mm512_dpbusd_epi32(p, wu.v[i], _mm512_load_si512(xu + 64 * i));
    return p;
}

// out[t * out_stride + r] for R weight rows and T tokens; xa holds the arranged
// activation rows, xa_stride bytes apart.
template <DType W, int R, int T>
void quant_dot_tile(int64_t nb, const std::byte* w, size_t w_stride, const std::byte* xa, size_t xa_stride,
                    float* out, int64_t out_stride) noexcept {
    using U = DotUnit<W>;
    constexpr int64_t BB = kBlockBytes<W>;
    const __m512i scale_offsets = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(BB));
    // Lane i of a unit belongs to block (i / lanes per block) of the unit.
    const __m512i unit_lanes = W == DType::Q8_0
                                   ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                                   : _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);

    const std::byte* wr[R];
    for (int r = 0; r < R; ++r) wr[r] = w + r * w_stride;
    // The same blocks of a later tile, at least kPrefetchBytes ahead in the
    // contiguous weight stream (one tile ahead is too close for short rows).
    const int64_t tile_bytes = R * static_cast<int64_t>(w_stride);
    const int64_t ahead_bytes = std::max<int64_t>(1, kPrefetchBytes / tile_bytes) * tile_bytes;
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();

    for (int64_t g0 = 0; g0 < nb; g0 += 16) {
        const int64_t group = std::min<int64_t>(16, nb - g0);
        const auto mask = static_cast<__mmask16>((1u << group) - 1u);
        // The fp16 scales of 16 blocks: a 4-byte gather at each block start
        // (scale + first two codes, always inside the block), low halves kept.
        __m512 dw[R];
        for (int r = 0; r < R; ++r) {
            const __m512i raw =
                _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, scale_offsets, wr[r] + g0 * BB, 1);
            dw[r] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
            // One token: fold its 16 block scales in now, saving a multiply per unit.
            if constexpr (T == 1) {
                const auto* dx = reinterpret_cast<const float*>(xa + units_bytes<W>(nb));
                dw[r] = _mm512_mul_ps(dw[r], _mm512_load_ps(dx + g0));
            }
        }
        for (int64_t j = 0; j * U::kBlocks < group; ++j) {
            const int64_t b = g0 + j * U::kBlocks;
            const int64_t present = std::min<int64_t>(U::kBlocks, nb - b);
            const __m512i lanes = _mm512_add_epi32(unit_lanes, _mm512_set1_epi32(static_cast<int>(j * U::kBlocks)));
            const std::byte* xu = xa + (b / U::kBlocks) * U::kBytes;
            for (int r = 0; r < R; ++r) {
                // A later tile's row r at the same blocks: the unit's first and
                // last byte, since a unit may straddle 3 lines.
                const std::byte* ahead = wr[r] + ahead_bytes + b * BB;
                __builtin_prefetch(ahead, 0, 3);
                __builtin_prefetch(ahead + U::kBlocks * BB - 1, 0, 3);
                const WeightUnit<W> wu = load_weight_unit<W>(wr[r] + b * BB, present);
                const __m512 sw = _mm512_permutexvar_ps(lanes, dw[r]);
                for (int t = 0; t < T; ++t) {
                    const std::byte* xt = xu + t * xa_stride;
                    const __m512i p = dot_unit<W>(wu, xt);
                    if constexpr (T == 1) {
                        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sw, acc[r][t]);
                    } else {
                        const __m512 g = _mm512_mul_ps(_mm512_cvtepi32_ps(p), _mm512_load_ps(xt + U::kScale));
                        acc[r][t] = _mm512_fmadd_ps(g, sw, acc[r][t]);
                    }
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) out[t * out_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

using DotTileFn = void (*)(int64_t, const std::byte*, size_t, const std::byte*, size_t, float*, int64_t) noexcept;

template <DType W, int R, size_t... T>
constexpr std::array<DotTileFn, sizeof...(T)> dot_table(std::index_sequence<T...>) noexcept {
    return {quant_dot_tile<W, R, static_cast<int>(T) + 1>...};
}

template <DType W>
bool quant_matmul_dot(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                      size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    static constexpr auto kFull = dot_table<W, kDotRows>(std::make_index_sequence<kDotTokens>{});
    static constexpr auto kOne = dot_table<W, 1>(std::make_index_sequence<kDotTokens>{});
    const int64_t nb = k / 32;
    const auto row_bytes = static_cast<size_t>(arranged_row_bytes<W>(nb));
    std::byte* xa = thread_scratch(static_cast<size_t>(n_tokens) * row_bytes);
    if (xa == nullptr) return false;
    for (int64_t t = 0; t < n_tokens; ++t)
        arrange_units<W>(x + t * static_cast<int64_t>(x_stride), nb, xa + t * static_cast<int64_t>(row_bytes));

    for (int64_t t0 = 0; t0 < n_tokens; t0 += kDotTokens) {
        const auto nt = static_cast<size_t>(std::min<int64_t>(kDotTokens, n_tokens - t0));
        const std::byte* xt = xa + t0 * static_cast<int64_t>(row_bytes);
        float* ot = out + t0 * out_stride;
        int64_t r = r0;
        for (; r + kDotRows <= r1; r += kDotRows)
            kFull[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, row_bytes, ot + r, out_stride);
        for (; r < r1; ++r)
            kOne[nt - 1](nb, w + r * static_cast<int64_t>(w_stride), w_stride, xt, row_bytes, ot + r, out_stride);
    }
    return true;
}

// ------------------------------------------------------------------ GEMM path

constexpr int kTokens = 6;          // tokens per micro-kernel tile: 2 x 6 int32 + 2 x 6 float accumulators
constexpr int64_t kPanelRows = 32;  // two 16-lane vectors of rows
constexpr int64_t kChunkBlocks = 32;
// Per block of a packed panel: 8 quads x 2 vectors x 64 B of u8 codes, then 2 x 16 f32 scales.
constexpr int64_t kPanelBlockBytes = 8 * 128 + 128;
// Per block of a packed token tile: kTokens x 32 codes, kTokens f32 scales, kTokens i32 corrections.
constexpr int64_t kTileCodes = 0, kTileScales = kTokens * 32, kTileCorr = kTileScales + kTokens * 4;
constexpr int64_t kTileBlockBytes = 256;
static_assert(kTileCorr + kTokens * 4 <= kTileBlockBytes);

// Token tiles: for each tile of kTokens tokens and each block, the tokens'
// codes (the s8 side, used raw), scales, and -128 x (sum of codes) to cancel
// the +128 carried by the packed weights. Missing tokens are zero.
void pack_token_tiles(const std::byte* x, size_t x_stride, int64_t n_tokens, int64_t nb, std::byte* dst) noexcept {
    const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
    std::memset(dst, 0, static_cast<size_t>(n_tiles * nb * kTileBlockBytes));
    for (int64_t token = 0; token < n_tokens; ++token) {
        const int64_t tile = token / kTokens, t = token % kTokens;
        const std::byte* row = x + token * static_cast<int64_t>(x_stride);
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* blk = row + b * kXBlockBytes;
            std::byte* d = dst + (tile * nb + b) * kTileBlockBytes;
            const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + kTileCodes + t * 32), codes);
            // Sum of the 32 signed codes: sum of (code + 128) over unsigned bytes, less 32 * 128.
            const __m256i sad =
                _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
            const auto sum = static_cast<int32_t>(_mm256_extract_epi64(sad, 0) + _mm256_extract_epi64(sad, 1) +
                                                  _mm256_extract_epi64(sad, 2) + _mm256_extract_epi64(sad, 3)) -
                             32 * 128;
            const float scale = half_at(blk);
            const int32_t corr = -128 * sum;
            std::memcpy(d + kTileScales + t * 4, &scale, 4);
            std::memcpy(d + kTileCorr + t * 4, &corr, 4);
        }
    }
}

// Packs rows [0, rows) of the panel starting at w, blocks [b0, b0 + nbc). Rows
// past `rows` are masked out of the gathers (their lanes are never stored).
// Interleaved weights (Q8_0_R16, Q4_0_R16) hold each 16 rows' quads and scales
// side by side already: plain loads instead of gathers.
template <DType W>
void pack_interleaved_panel(const std::byte* w, size_t w_stride, int rows, int64_t b0, int64_t nbc,
                            std::byte* panel) noexcept {
    constexpr int64_t GB = 16 * kBlockBytes<W>;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 2; ++g) {
        const bool present = rows > g * 16;  // rows come in whole groups of 16
        const std::byte* base = w + g * 16 * static_cast<int64_t>(w_stride);
        for (int64_t b = 0; b < nbc; ++b) {
            const std::byte* blk = base + (b0 + b) * GB;
            std::byte* d = panel + b * kPanelBlockBytes + g * 64;
            const auto quad = [&](int q) { return present ? _mm512_loadu_si512(blk + 32 + 64 * q) : _mm512_setzero_si512(); };
            if constexpr (W == DType::Q8_0) {
                for (int q = 0; q < 8; ++q) _mm512_store_si512(d + q * 128, _mm512_xor_si512(quad(q), _mm512_set1_epi8(-128)));
            } else {
                for (int i = 0; i < 4; ++i) {
                    const __m512i v = quad(i);
                    const __m512i lo = _mm512_and_si512(v, low4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
                    _mm512_store_si512(d + i * 128, _mm512_add_epi8(lo, _mm512_set1_epi8(120)));
                    _mm512_store_si512(d + (4 + i) * 128, _mm512_add_epi8(hi, _mm512_set1_epi8(120)));
                }
            }
            const __m512 scales = present ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)))
                                          : _mm512_setzero_ps();
            _mm512_store_ps(panel + b * kPanelBlockBytes + 1024 + g * 64, scales);
        }
    }
}

template <DType W>
void pack_quant_panel(const std::byte* w, size_t w_stride, int rows, int64_t b0, int64_t nbc,
                      std::byte* panel) noexcept {
    constexpr int64_t BB = kBlockBytes<W>;
    const __m512i row_offsets =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(static_cast<int>(w_stride)));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 2; ++g) {
        const int valid = std::clamp(rows - g * 16, 0, 16);
        const auto mask = static_cast<__mmask16>((1u << valid) - 1u);
        const std::byte* base = w + g * 16 * static_cast<int64_t>(w_stride);
        for (int64_t b = 0; b < nbc; ++b) {
            const std::byte* blk = base + (b0 + b) * BB;
            std::byte* d = panel + b * kPanelBlockBytes + g * 64;
            const __m512i zero = _mm512_setzero_si512();
            if constexpr (W == DType::Q8_0) {
                for (int q = 0; q < 8; ++q) {
                    const __m512i v = _mm512_mask_i32gather_epi32(zero, mask, row_offsets, blk + 2 + 4 * q, 1);
                    _mm512_store_si512(d + q * 128, _mm512_xor_si512(v, _mm512_set1_epi8(-128)));
                }
            } else {
                // 4 bytes of a Q4_0 block hold elements 4i..4i+3 (low nibbles)
                // and 16+4i..16+4i+3 (high nibbles): quads i and 4+i. As u8:
                // (q - 8) + 128 = q + 120.
                for (int i = 0; i < 4; ++i) {
                    const __m512i v = _mm512_mask_i32gather_epi32(zero, mask, row_offsets, blk + 2 + 4 * i, 1);
                    const __m512i lo = _mm512_and_si512(v, low4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
                    _mm512_store_si512(d + i * 128, _mm512_add_epi8(lo, _mm512_set1_epi8(120)));
                    _mm512_store_si512(d + (4 + i) * 128, _mm512_add_epi8(hi, _mm512_set1_epi8(120)));
                }
            }
            const __m512i raw = _mm512_mask_i32gather_epi32(zero, mask, row_offsets, blk, 1);
            _mm512_store_ps(panel + b * kPanelBlockBytes + 1024 + g * 64, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
        }
    }
}

template <int T>
void quant_gemm_tile(int64_t nbc, const std::byte* panel, const std::byte* tile, float* out, int64_t out_stride,
                     int rows, bool accumulate) noexcept {
    __m512 acc0[T], acc1[T];
    for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nbc; ++b) {
        const std::byte* pb = panel + b * kPanelBlockBytes;
        const std::byte* xb = tile + b * kTileBlockBytes;
        __m512i p0[T], p1[T];
        for (int t = 0; t < T; ++t) {
            int32_t corr;
            std::memcpy(&corr, xb + kTileCorr + t * 4, 4);
            p0[t] = p1[t] = _mm512_set1_epi32(corr);
        }
        for (int q = 0; q < 8; ++q) {
            const __m512i w0 = _mm512_load_si512(pb + q * 128);
            const __m512i w1 = _mm512_load_si512(pb + q * 128 + 64);
            for (int t = 0; t < T; ++t) {
                int32_t quad;
                std::memcpy(&quad, xb + kTileCodes + t * 32 + q * 4, 4);
                const __m512i xq = _mm512_set1_epi32(quad);
                p0[t] = _mm512_dpbusd_epi32(p0[t], w0, xq);
                p1[t] = _mm512_dpbusd_epi32(p1[t], w1, xq);
            }
        }
        const __m512 dw0 = _mm512_load_ps(pb + 1024);
        const __m512 dw1 = _mm512_load_ps(pb + 1088);
        for (int t = 0; t < T; ++t) {
            float dx;
            std::memcpy(&dx, xb + kTileScales + t * 4, 4);
            const __m512 s = _mm512_set1_ps(dx);
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0[t]), _mm512_mul_ps(dw0, s), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1[t]), _mm512_mul_ps(dw1, s), acc1[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        float* o = out + t * out_stride;
        if (rows == kPanelRows) {
            if (accumulate) {
                acc0[t] = _mm512_add_ps(acc0[t], _mm512_loadu_ps(o));
                acc1[t] = _mm512_add_ps(acc1[t], _mm512_loadu_ps(o + 16));
            }
            _mm512_storeu_ps(o, acc0[t]);
            _mm512_storeu_ps(o + 16, acc1[t]);
        } else {
            alignas(64) float tmp[kPanelRows];
            _mm512_store_ps(tmp, acc0[t]);
            _mm512_store_ps(tmp + 16, acc1[t]);
            for (int r = 0; r < rows; ++r) o[r] = accumulate ? o[r] + tmp[r] : tmp[r];
        }
    }
}

using GemmTileFn = void (*)(int64_t, const std::byte*, const std::byte*, float*, int64_t, int, bool) noexcept;

template <size_t... T>
constexpr std::array<GemmTileFn, sizeof...(T)> gemm_table(std::index_sequence<T...>) noexcept {
    return {quant_gemm_tile<static_cast<int>(T) + 1>...};
}

template <DType W, bool kInterleaved = false>
bool quant_matmul_gemm(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                       size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                       const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    static constexpr auto kTiles = gemm_table(std::make_index_sequence<kTokens>{});
    const int64_t nb = k / 32;
    const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
    const auto tiles_bytes = static_cast<size_t>(n_tiles * nb * kTileBlockBytes);
    const auto panel_bytes = static_cast<size_t>(std::min(kChunkBlocks, nb) * kPanelBlockBytes);
    std::byte* tiles = thread_scratch(tiles_bytes + panel_bytes);
    if (tiles == nullptr) return false;
    std::byte* panel = tiles + tiles_bytes;
    pack_token_tiles(x, x_stride, n_tokens, nb, tiles);

    // A panel's chunks one after another: its rows stream front to back.
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t p0 = a; p0 < b; p0 += kPanelRows) {
            const int rows = static_cast<int>(std::min(kPanelRows, b - p0));
            for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
                const int64_t nbc = std::min(kChunkBlocks, nb - b0);
                if constexpr (kInterleaved)
                    pack_interleaved_panel<W>(w + p0 * static_cast<int64_t>(w_stride), w_stride, rows, b0, nbc, panel);
                else
                    pack_quant_panel<W>(w + p0 * static_cast<int64_t>(w_stride), w_stride, rows, b0, nbc, panel);
                for (int64_t tile = 0; tile < n_tiles; ++tile) {
                    const auto nt = static_cast<size_t>(std::min<int64_t>(kTokens, n_tokens - tile * kTokens));
                    kTiles[nt - 1](nbc, panel, tiles + (tile * nb + b0) * kTileBlockBytes,
                                   out + tile * kTokens * out_stride + p0, out_stride, rows, b0 > 0);
                }
            }
        }
    });
    return true;
}

// From this many tokens on the GEMM is faster even with cache-resident weights
// (kiln-kernel-bench --sweep: at 4 tokens about 120 vs 105 GOP/s on one core),
// and it reads streamed weights once instead of once per kDotTokens tokens.
constexpr int64_t kQuantGemmMinTokens = 4;

template <DType W>
bool quant_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                  size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    // The panel gathers address 16 rows with 32-bit offsets.
    const bool gather_ok = w_stride <= static_cast<size_t>(INT_MAX / 16);
    if (n_tokens >= kQuantGemmMinTokens && gather_ok && k > 0)
        return quant_matmul_gemm<W>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
    // The decode path arranges the few activation rows per chunk (cheap next to
    // streaming the weights). Its scratch is had first: the scratch never
    // shrinks, so once had no chunk's call can fail after chunks were claimed.
    if (thread_scratch(static_cast<size_t>(n_tokens * arranged_row_bytes<W>(k / 32))) == nullptr) return false;
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        quant_matmul_dot<W>(k, w, w_stride, a, b, x, x_stride, n_tokens, out, out_stride);
    });
    return true;
}

}  // namespace

bool avx512_quant_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                         const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                         const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    if (type == DType::Q8_0_R16)
        return quant_matmul_gemm<DType::Q8_0, true>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
    if (type == DType::Q4_0_R16)
        return quant_matmul_gemm<DType::Q4_0, true>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
    if (type == DType::Q8_0)
        return quant_matmul<DType::Q8_0>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
    return quant_matmul<DType::Q4_0>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
}

}  // namespace kiln::kernels::detail

#endif  // KILN_HAVE_AVX512_VNNI
