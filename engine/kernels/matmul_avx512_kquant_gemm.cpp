// The K-quant GEMM of the "avx512-vnni" set: Q2_K..Q6_K weights against many
// Q8_K-prepared tokens (prompt processing).
//
// The decode tiles unpack a super-block for every 4 tokens; here each weight
// super-block is unpacked once per 32-row chunk into a panel (codes as u8 in
// element order, integer sub-block scales, the bsum-term weights as int16
// pairs, d and dmin), and tokens sit in the lanes: activations are packed once
// per call in tiles of 16 or 32 tokens, one 4-byte quad of codes per token per
// lane. The micro-kernel broadcasts one quad of a weight row (the u8 side of
// vpdpbusd, 4 rows) against one or two vectors of token quads (the s8 side),
// so no weight transpose is needed and each unpacked byte meets 32 tokens.
//
// Per sub-block (32 elements for Q4_K/Q5_K, 16 for the others) the exact int32
// dot is multiplied by the row's integer scale and summed over the super-block
// in int32; the bsum term (mins, or the -4 / -32 offsets of Q3_K / Q6_K) is one
// vpdpwssd per pair of 16-element groups. Both are exact, as in the decode
// tiles: per super-block the float arithmetic is cvt(isum) * d * dx (less
// cvt(bsum term) * dmin * dx), and only the float sum over super-blocks is
// ordered differently from the scalar set. Each row's arithmetic is the same
// whatever panel, chunk or thread computes it. Interleaved weights (Q4_K_R16)
// are put back into plain blocks as they are unpacked; chunks start on whole
// 16-row groups.
#include "engine/kernels/matmul_avx512.h"

#if KILN_HAVE_AVX512_VNNI

#include "engine/kernels/matmul_avx512_kquant_unpack.h"
#include "engine/quant/interleave.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

using namespace avx512_kquant;

// One unpacked super-block of one row in a panel.
struct alignas(64) PanelBlock {
    uint8_t codes[256];     // unsigned codes in element order
    int32_t scales[16];     // per 16-element group (Q4_K/Q5_K use the even ones, per 32)
    int32_t corr_pairs[8];  // bsum-term weights of groups 2j, 2j+1 as an int16 pair
    float d, dmin;
    uint8_t pad[384 - 256 - 64 - 32 - 8];
};
static_assert(sizeof(PanelBlock) == 384);

constexpr int kPanelRows = 4;    // rows per micro-kernel
constexpr int64_t kChunkRows = 32;  // rows unpacked together (the row tile)
constexpr int kVecTokens = 16;

// Per super-block of a token tile of V x 16 tokens: 64 quads x V vectors of
// codes, 8 bsum pairs x V vectors, V vectors of scales.
template <int V>
struct TileLayout {
    static constexpr int64_t kCodes = 0;
    static constexpr int64_t kPairs = 64 * V * 64;
    static constexpr int64_t kScales = kPairs + 8 * V * 64;
    static constexpr int64_t kBytes = kScales + V * 64;
};

// Row r of a chunk: its plain blocks, or (interleaved) row r % 16 of its group.
struct ChunkRow {
    const std::byte* base;  // the row, or its group
    int in_group;           // -1 for a plain row
};

template <DType T>
void unpack_row_blocks(ChunkRow row, DType layout, int64_t nb, PanelBlock* dst, int64_t dst_stride) noexcept {
    alignas(64) std::byte plain[kBlockBytes<T>];
    for (int64_t i = 0; i < nb; ++i) {
        Unpacked u;
        const std::byte* block = row.base + i * kBlockBytes<T>;
        if (row.in_group >= 0) {
            quant::deinterleaved_block(layout, row.base, nb * 256, row.in_group, i, plain);
            block = plain;
        }
        unpack<T>(block, u);
        PanelBlock& p = dst[i * dst_stride];
        for (int c = 0; c < 4; ++c) _mm512_store_si512(p.codes + 64 * c, u.codes[c]);
        _mm512_store_si512(p.scales, _mm512_cvtepi16_epi32(u.scales));
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.corr_pairs), u.corr);
        p.d = u.d;
        p.dmin = u.dmin;
    }
}

// Unpacks rows [0, rows) of a chunk into panels of kPanelRows rows, blocks of a
// panel's rows side by side; rows past `rows` are zero (their results are dropped).
template <DType T>
void unpack_chunk(const std::byte* w, size_t w_stride, DType layout, int rows, int64_t nb,
                  PanelBlock* panels) noexcept {
    const int padded = (rows + kPanelRows - 1) / kPanelRows * kPanelRows;
    const bool interleaved = quant::is_interleaved(layout);
    for (int r = 0; r < padded; ++r) {
        PanelBlock* first = panels + (r / kPanelRows) * nb * kPanelRows + r % kPanelRows;
        if (r < rows) {
            const int in_group = r % static_cast<int>(quant::kInterleaveRows);
            const ChunkRow row = interleaved ? ChunkRow{w + (r - in_group) * static_cast<int64_t>(w_stride), in_group}
                                             : ChunkRow{w + r * static_cast<int64_t>(w_stride), -1};
            unpack_row_blocks<T>(row, layout, nb, first, kPanelRows);
        } else {
            for (int64_t i = 0; i < nb; ++i) std::memset(&first[i * kPanelRows], 0, sizeof(PanelBlock));
        }
    }
}

// Packs tokens [t0, t0 + nt) (nt <= V x 16) of the prepared Q8_K rows into one
// tile; missing tokens are zero.
template <int V>
void pack_tile(const std::byte* x, size_t x_stride, int64_t t0, int nt, int64_t nb, std::byte* tile) noexcept {
    using L = TileLayout<V>;
    std::memset(tile, 0, static_cast<size_t>(nb * L::kBytes));
    for (int t = 0; t < nt; ++t) {
        const std::byte* row = x + (t0 + t) * static_cast<int64_t>(x_stride);
        const int v = t / kVecTokens, lane = t % kVecTokens;
        for (int64_t i = 0; i < nb; ++i) {
            const std::byte* xb = row + i * kXBytes;
            std::byte* d = tile + i * L::kBytes;
            for (int q = 0; q < 64; ++q) std::memcpy(d + L::kCodes + (q * V + v) * 64 + 4 * lane, xb + kXCodes + 4 * q, 4);
            for (int j = 0; j < 8; ++j) std::memcpy(d + L::kPairs + (j * V + v) * 64 + 4 * lane, xb + kXBsums + 4 * j, 4);
            std::memcpy(d + L::kScales + v * 64 + 4 * lane, xb, 4);
        }
    }
}

inline __m512i bcast32(const void* p) noexcept {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// out[t][r] for the panel's kPanelRows rows and the tile's V x 16 tokens.
template <DType T, int V>
void gemm_tile(int64_t nb, const PanelBlock* panel, const std::byte* tile, float* res) noexcept {
    using L = TileLayout<V>;
    constexpr int R = kPanelRows;
    constexpr bool kHasMin = T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K;
    constexpr int kGroup = T == DType::Q4_K || T == DType::Q5_K ? 32 : 16;  // elements per scale
    __m512 acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const PanelBlock* pb = panel + i * R;
        const std::byte* xb = tile + i * L::kBytes;
        __m512i isum[R][V];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) isum[r][v] = _mm512_setzero_si512();
        for (int g = 0; g < 256 / kGroup; ++g) {
            __m512i p[R][V];
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v) p[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int q = g * kGroup / 4; q < (g + 1) * kGroup / 4; ++q) {
                __m512i xq[V];
                for (int v = 0; v < V; ++v) xq[v] = _mm512_load_si512(xb + L::kCodes + (q * V + v) * 64);
                for (int r = 0; r < R; ++r) {
                    const __m512i wq = bcast32(pb[r].codes + 4 * q);
                    for (int v = 0; v < V; ++v) p[r][v] = _mm512_dpbusd_epi32(p[r][v], wq, xq[v]);
                }
            }
            for (int r = 0; r < R; ++r) {
                const __m512i s = _mm512_set1_epi32(pb[r].scales[g * kGroup / 16]);
                for (int v = 0; v < V; ++v) {
                    const __m512i scaled = _mm512_mullo_epi32(p[r][v], s);
                    isum[r][v] = _mm512_add_epi32(isum[r][v], scaled);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int v = 0; v < V; ++v) {
                __m512i corr = _mm512_setzero_si512();
                for (int j = 0; j < 8; ++j)
                    corr = _mm512_dpwssd_epi32(corr, _mm512_load_si512(xb + L::kPairs + (j * V + v) * 64),
                                               _mm512_set1_epi32(pb[r].corr_pairs[j]));
                const __m512 dx = _mm512_load_ps(xb + L::kScales + v * 64);
                if constexpr (kHasMin) {
                    acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][v]),
                                                _mm512_mul_ps(_mm512_set1_ps(pb[r].d), dx), acc[r][v]);
                    acc[r][v] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr),
                                                 _mm512_mul_ps(_mm512_set1_ps(pb[r].dmin), dx), acc[r][v]);
                } else {
                    acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[r][v], corr)),
                                                _mm512_mul_ps(_mm512_set1_ps(pb[r].d), dx), acc[r][v]);
                }
            }
        }
    }
    // Token-major results of the chunk's rows: a token's are kChunkRows floats apart.
    const __m512i index = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(kChunkRows));
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v)
            _mm512_i32scatter_ps(res + v * kVecTokens * kChunkRows + r, index, acc[r][v], 4);
}

// Tokens per tile: two vectors where there are enough tokens, else one.
constexpr int64_t kTileTokens = 2 * kVecTokens;
// Tiles of a token block stay in L2 while every panel of a chunk passes them.
constexpr int64_t kTokenBlockBytes = 384 * 1024;

template <DType T>
bool kquant_gemm(DType layout, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                 const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                 const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    const int64_t nb = k / 256;
    const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    const int64_t tile_bytes = nb * TileLayout<2>::kBytes;
    const auto tiles_bytes = static_cast<size_t>(n_tiles * tile_bytes);
    const auto panels_bytes = static_cast<size_t>(kChunkRows * nb) * sizeof(PanelBlock);
    const int64_t block_tiles = std::max<int64_t>(1, kTokenBlockBytes / tile_bytes);
    const auto results_bytes = static_cast<size_t>(block_tiles * kTileTokens * kChunkRows) * sizeof(float);
    std::byte* tiles = thread_scratch(tiles_bytes + panels_bytes + results_bytes);
    if (tiles == nullptr) return false;
    auto* panels = reinterpret_cast<PanelBlock*>(tiles + tiles_bytes);
    auto* results = reinterpret_cast<float*>(tiles + tiles_bytes + panels_bytes);
    // A tile of 17-32 tokens takes two vectors, the last one of 1-16 one.
    const auto tile_vectors = [&](int64_t tile) {
        return n_tokens - tile * kTileTokens > kVecTokens ? 2 : 1;
    };
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const int nt = static_cast<int>(std::min(kTileTokens, n_tokens - tile * kTileTokens));
        std::byte* dst = tiles + tile * tile_bytes;
        if (tile_vectors(tile) == 2)
            pack_tile<2>(x, x_stride, tile * kTileTokens, nt, nb, dst);
        else
            pack_tile<1>(x, x_stride, tile * kTileTokens, nt, nb, dst);
    }

    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t c0 = a; c0 < b; c0 += kChunkRows) {
            const int rows = static_cast<int>(std::min(kChunkRows, b - c0));
            unpack_chunk<T>(w + c0 * static_cast<int64_t>(w_stride), w_stride, layout, rows, nb, panels);
            for (int64_t tb = 0; tb < n_tiles; tb += block_tiles) {
                const int64_t tb_end = std::min(n_tiles, tb + block_tiles);
                for (int p = 0; p * kPanelRows < rows; ++p) {
                    const PanelBlock* panel = panels + p * nb * kPanelRows;
                    for (int64_t tile = tb; tile < tb_end; ++tile) {
                        const std::byte* t = tiles + tile * tile_bytes;
                        float* res = results + (tile - tb) * kTileTokens * kChunkRows + p * kPanelRows;
                        if (tile_vectors(tile) == 2)
                            gemm_tile<T, 2>(nb, panel, t, res);
                        else
                            gemm_tile<T, 1>(nb, panel, t, res);
                    }
                }
                // The block's results, one contiguous run of `rows` floats per token.
                for (int64_t tile = tb; tile < tb_end; ++tile) {
                    const int nt = static_cast<int>(std::min(kTileTokens, n_tokens - tile * kTileTokens));
                    for (int t = 0; t < nt; ++t)
                        std::memcpy(out + (tile * kTileTokens + t) * out_stride + c0,
                                    results + ((tile - tb) * kTileTokens + t) * kChunkRows,
                                    static_cast<size_t>(rows) * sizeof(float));
                }
            }
        }
    });
    return true;
}

}  // namespace

bool avx512_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                        const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                        const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    switch (type) {
        case DType::Q2_K: return kquant_gemm<DType::Q2_K>(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q3_K: return kquant_gemm<DType::Q3_K>(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_K:
        case DType::Q4_K_R16: return kquant_gemm<DType::Q4_K>(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q5_K:
        case DType::Q5_K_R16: return kquant_gemm<DType::Q5_K>(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        default: return kquant_gemm<DType::Q6_K>(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
    }
}

}  // namespace kiln::kernels::detail

#endif  // KILN_HAVE_AVX512_VNNI
