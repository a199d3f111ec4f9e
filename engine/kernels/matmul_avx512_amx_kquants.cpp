// The K-quant GEMM of the "amx" set: Q2_K..Q6_K weights (plain, or their
// 16-row interleaved layouts) against many Q8_K-prepared tokens, on AMX tiles.
//
// Each weight super-block is unpacked (matmul_avx512_kquant_unpack.h, as the
// avx512-vnni K-quant GEMM does) once per 32-row chunk, 16 rows together:
// the codes, unsigned, transposed into B tiles (the 4-byte quad q of row n at
// 64 q + 4 n), and per 16-element scale group the 16 rows' integer scales,
// per bsum pair the 16 rows' weights, and the rows' d and dmin, each as one
// vector over the rows. Tokens are packed per super-block 16 at a time: their
// codes (the A tiles of every scale group, 256 bytes apart), bsum pairs and d.
//
// Per scale group (32 elements for Q4_K/Q5_K, 16 for the others) TDPBSUD
// (signed tokens x unsigned codes) gives the exact 16 x 16 int32 dots; per
// token they are multiplied by the rows' scales and summed over the
// super-block in int32, the bsum term is one vpdpwssd per pair, and the float
// arithmetic per super-block is the avx512-vnni GEMM's: acc += cvt(isum) *
// (d * dx), acc -= cvt(bsum term) * (dmin * dx) (or cvt(isum - term) * (d *
// dx) for the types without mins). The same exact integers and the same float
// operations in the same order: that set's bits. A super-block's tile
// products are issued before the previous one's sums are read.
#include "engine/kernels/matmul_avx512_amx.h"

#if KILN_HAVE_AMX_INT8

#include "engine/kernels/matmul_avx512_kquant_unpack.h"
#include "engine/quant/interleave.h"

#include <algorithm>
#include <cstring>

namespace kiln::kernels::detail {
namespace {

using namespace avx512_kquant;

constexpr int64_t kChunkRows = 32;  // the row tile: two groups of 16 rows
constexpr int kTileTokens = 16;

// One super-block of 16 weight rows, unpacked.
struct alignas(64) GroupBlock {
    uint8_t b[64 * 64];      // the codes as B tiles: quad q (elements 4q..4q+3) of row n at 64 q + 4 n
    int32_t scales[16][16];  // [16-element group][row] (Q4_K/Q5_K: each scale twice)
    int32_t corr[8][16];     // [bsum pair][row]: the pair's two int16 weights
    float d[16], dmin[16];
};

// One super-block of 16 tokens.
struct alignas(64) TokenBlock {
    int8_t codes[16][256];    // [token][element]: the A tile of a scale group starts at its first element
    int32_t pairs[8][16];     // [bsum pair][token]: two int16 bsums
    float d[16];
};

template <DType T>
constexpr int kGroup = T == DType::Q4_K || T == DType::Q5_K ? 32 : 16;  // elements per scale

// Rows [0, rows) (rows <= 16) of the 16-row group starting at `group` (plain
// rows w_stride apart, or an interleaved group), super-blocks [0, nb), into
// dst[0, nb). Missing rows are zero (their results are never stored).
template <DType T>
void unpack_group(const std::byte* group, size_t w_stride, bool interleaved, DType layout, int rows, int64_t nb,
                  GroupBlock* dst) noexcept {
    alignas(64) uint8_t codes[16][256];
    alignas(64) std::byte plain[kBlockBytes<T>];
    const __m512i row_offsets = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(256));
    for (int64_t i = 0; i < nb; ++i) {
        GroupBlock& g = dst[i];
        alignas(64) int32_t scales[16][16];  // [row][16-element group]
        alignas(32) int32_t corr[16][8];     // [row][pair]
        for (int n = 0; n < 16; ++n) {
            if (n >= rows) {
                std::memset(codes[n], 0, 256);
                std::memset(scales[n], 0, sizeof(scales[n]));
                std::memset(corr[n], 0, sizeof(corr[n]));
                g.d[n] = g.dmin[n] = 0.0f;
                continue;
            }
            const std::byte* block = group + n * static_cast<int64_t>(w_stride) + i * kBlockBytes<T>;
            if (interleaved) {
                quant::deinterleaved_block(layout, group, nb * 256, n, i, plain);
                block = plain;
            }
            Unpacked u;
            unpack<T>(block, u);
            for (int c = 0; c < 4; ++c) _mm512_store_si512(codes[n] + 64 * c, u.codes[c]);
            _mm512_store_si512(scales[n], _mm512_cvtepi16_epi32(u.scales));
            _mm256_store_si256(reinterpret_cast<__m256i*>(corr[n]), u.corr);
            g.d[n] = u.d;
            g.dmin[n] = u.dmin;
        }
        for (int q = 0; q < 64; ++q)
            _mm512_store_si512(g.b + 64 * q, _mm512_i32gather_epi32(row_offsets, codes[0] + 4 * q, 1));
        for (int s = 0; s < 16; ++s)
            for (int n = 0; n < 16; ++n) g.scales[s][n] = scales[n][s];
        for (int j = 0; j < 8; ++j)
            for (int n = 0; n < 16; ++n) g.corr[j][n] = corr[n][j];
    }
}

// Tokens [t0, t0 + nt) (nt <= 16) of the prepared rows, super-blocks [0, nb); missing tokens are zero.
void pack_tokens(const std::byte* x, size_t x_stride, int64_t t0, int nt, int64_t nb, TokenBlock* dst) noexcept {
    std::memset(static_cast<void*>(dst), 0, static_cast<size_t>(nb) * sizeof(TokenBlock));
    for (int t = 0; t < nt; ++t) {
        const std::byte* row = x + (t0 + t) * static_cast<int64_t>(x_stride);
        for (int64_t i = 0; i < nb; ++i) {
            const std::byte* xb = row + i * kXBytes;
            TokenBlock& d = dst[i];
            std::memcpy(d.codes[t], xb + kXCodes, 256);
            for (int j = 0; j < 8; ++j) std::memcpy(&d.pairs[j][t], xb + kXBsums + 4 * j, 4);
            std::memcpy(&d.d[t], xb, 4);
        }
    }
}

// The tile products of scale groups s and s + 1 of one super-block, stored as 16 x 16 int32 each.
template <int G>
inline void group_products(const TokenBlock& x, const GroupBlock& w, int s, int32_t (*sums)[256]) noexcept {
    constexpr int kQuadRows = G / 4;
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(2, x.codes[0] + s * G, 256);
    _tile_loadd(4, w.b + s * kQuadRows * 64, 64);
    _tile_loadd(3, x.codes[0] + (s + 1) * G, 256);
    _tile_loadd(5, w.b + (s + 1) * kQuadRows * 64, 64);
    _tile_dpbsud(0, 2, 4);
    _tile_dpbsud(1, 3, 5);
    _tile_stored(0, sums[s], 64);
    _tile_stored(1, sums[s + 1], 64);
}

// out[t][n] for the 16 tokens of a packed tile (the first `tokens` stored) and
// the 16 rows of a group (the first `rows` stored), over nb super-blocks.
template <DType T>
void group_gemm(int64_t nb, const GroupBlock* w, const TokenBlock* x, float* out, int64_t out_stride, int tokens,
                int rows) noexcept {
    constexpr int G = kGroup<T>;
    constexpr int kGroups = 256 / G;
    constexpr bool kHasMin = T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K;
    alignas(64) int32_t sums[2][kGroups][256];  // [super-block parity][scale group]
    __m512 acc[kTileTokens];
    for (auto& a : acc) a = _mm512_setzero_ps();
    // The int and float work of super-block i - 1 after the tile products of
    // i are issued: read right after a tile store, the sums stall the loads.
    const auto finish = [&](int64_t i) {
        const GroupBlock& wb = w[i];
        const TokenBlock& xb = x[i];
        const auto& bsums = sums[i & 1];
        const __m512 d = _mm512_load_ps(wb.d);
        const __m512 dmin = _mm512_load_ps(wb.dmin);
        for (int t = 0; t < kTileTokens; ++t) {
            __m512i isum = _mm512_setzero_si512();
            for (int s = 0; s < kGroups; ++s) {
                const __m512i scaled =
                    _mm512_mullo_epi32(_mm512_load_si512(bsums[s] + 16 * t), _mm512_load_si512(wb.scales[s * G / 16]));
                isum = _mm512_add_epi32(isum, scaled);
            }
            __m512i corr = _mm512_setzero_si512();
            for (int j = 0; j < 8; ++j)
                corr = _mm512_dpwssd_epi32(corr, _mm512_set1_epi32(xb.pairs[j][t]), _mm512_load_si512(wb.corr[j]));
            const __m512 dx = _mm512_set1_ps(xb.d[t]);
            if constexpr (kHasMin) {
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_mul_ps(dmin, dx), acc[t]);
            } else {
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum, corr)), _mm512_mul_ps(d, dx), acc[t]);
            }
        }
    };
    for (int64_t i = 0; i < nb; ++i) {
        for (int s = 0; s < kGroups; s += 2) group_products<G>(x[i], w[i], s, sums[i & 1]);
        if (i > 0) finish(i - 1);
    }
    if (nb > 0) finish(nb - 1);
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
    for (int t = 0; t < tokens; ++t) _mm512_mask_storeu_ps(out + t * out_stride, mask, acc[t]);
}

template <DType T>
bool kquant_gemm(DType layout, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                 const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                 const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    const int64_t nb = k / 256;
    const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    const auto tokens_bytes = static_cast<size_t>(n_tiles * nb) * sizeof(TokenBlock);
    const auto groups_bytes = static_cast<size_t>(2 * nb) * sizeof(GroupBlock);
    std::byte* scratch = thread_scratch(tokens_bytes + groups_bytes);
    if (scratch == nullptr) return false;
    auto* tokens = reinterpret_cast<TokenBlock*>(scratch);
    auto* groups = reinterpret_cast<GroupBlock*>(scratch + tokens_bytes);
    for (int64_t tile = 0; tile < n_tiles; ++tile)
        pack_tokens(x, x_stride, tile * kTileTokens, static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - tile * kTileTokens)),
                    nb, tokens + tile * nb);

    const bool interleaved = quant::is_interleaved(layout);
    static constexpr AmxTileConfig kConfig = int8_tile_config(kGroup<T>);
    _tile_loadconfig(&kConfig);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t c0 = a; c0 < b; c0 += kChunkRows) {
            const int64_t rows = std::min(kChunkRows, b - c0);
            for (int64_t g = 0; g * 16 < rows; ++g) {
                // Interleaved groups start where their first plain row would (interleave.h).
                const std::byte* base = w + (c0 + g * 16) * static_cast<int64_t>(w_stride);
                unpack_group<T>(base, w_stride, interleaved, layout, static_cast<int>(std::min<int64_t>(16, rows - g * 16)),
                                nb, groups + g * nb);
            }
            for (int64_t tile = 0; tile < n_tiles; ++tile) {
                const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - tile * kTileTokens));
                for (int64_t g = 0; g * 16 < rows; ++g)
                    group_gemm<T>(nb, groups + g * nb, tokens + tile * nb, out + tile * kTileTokens * out_stride + c0 + g * 16,
                                  out_stride, nt, static_cast<int>(std::min<int64_t>(16, rows - g * 16)));
            }
        }
    });
    _tile_release();
    return true;
}

}  // namespace

bool amx_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                     size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
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

#endif  // KILN_HAVE_AMX_INT8
