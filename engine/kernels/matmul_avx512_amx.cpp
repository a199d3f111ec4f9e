// The "amx" kernel set: the avx512-vnni set, with the prompt batches of Q8_0
// and Q4_0 weights (their 16-row interleaved layouts, quant/interleave.h)
// multiplied on Intel AMX tiles (TDPBSSD: 16 x 16 int32 results, each the dot
// product of 64-byte rows of signed bytes, ~1000 multiply-adds per cycle).
//
// Q8_0_R16 stores, per block of 32, the 16 rows' codes as eight rows of 64
// bytes whose 4-byte quads are the rows' codes 4q..4q+3: exactly the operand
// layout TDPBSSD wants for its second (B) tile with K = 32. So a panel of 32
// weight rows (two groups) is copied per block as two B tiles (Q4_0_R16's
// nibbles unpacked to q - 8 on the way) with its 32 row scales as floats, and
// activation tokens are packed per block as A tiles of 16 tokens x 32 codes
// with their 16 scales.
//
// One tile product covers one block only: the blocks' scales differ, so each
// 16 x 16 block sum is stored and scaled in AVX-512 registers, token by token:
// acc[t] += float(sum[t]) * (dw * dx[t]). That is the arithmetic of the
// avx512-vnni GEMM (matmul_avx512_quant.cpp) in the same order, over the same
// chunks of 32 blocks, on the same exact int32 block sums, so this set gives
// that set's bits. The tile products of a pair of blocks run while the pair
// before is scaled: read right after a tile store, the sums stall the loads.
//
// The K-quants run on tiles too (matmul_avx512_amx_kquants.cpp). Decode
// (fewer than kAmxMinTokens tokens) and the other types run the avx512-vnni
// set's kernels, on the same weights.
#include "engine/kernels/matmul_avx512_amx.h"

#if KILN_HAVE_AMX_INT8

#include "engine/kernels/dot_kquants_ref.h"
#include "engine/quant/interleave.h"

#include <algorithm>
#include <cstring>

namespace kiln::kernels::detail {
namespace {

constexpr int64_t kPanelRows = 32;    // two groups of 16 rows: two B tiles per block
constexpr int64_t kChunkBlocks = 32;  // as the avx512-vnni GEMM: the same sums over the same chunks
constexpr int64_t kTileTokens = 16;   // rows of an A tile
constexpr int64_t kXBlockBytes = 34;  // a prepared Q8_0 activation block

// Per block of a packed panel: the two groups' B tiles (8 x 64 bytes each), then their 2 x 16 float scales.
constexpr int64_t kPanelTileBytes = 512, kPanelScales = 2 * kPanelTileBytes, kPanelBlockBytes = kPanelScales + 128;
// Per block of a packed token tile: the A tile (16 tokens x 32 codes), then the 16 tokens' float scales.
constexpr int64_t kTokenScales = kTileTokens * 32, kTokenBlockBytes = kTokenScales + kTileTokens * 4;

// Token tiles of kTileTokens tokens, per block: codes as the A tile, then the
// scales as floats. Tokens past the last are zero (their sums are zero and are
// never stored).
void pack_token_tiles(const std::byte* x, size_t x_stride, int64_t n_tokens, int64_t nb, std::byte* dst) noexcept {
    const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    std::memset(dst, 0, static_cast<size_t>(n_tiles * nb * kTokenBlockBytes));
    for (int64_t token = 0; token < n_tokens; ++token) {
        const int64_t tile = token / kTileTokens, t = token % kTileTokens;
        const std::byte* row = x + token * static_cast<int64_t>(x_stride);
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* blk = row + b * kXBlockBytes;
            std::byte* d = dst + (tile * nb + b) * kTokenBlockBytes;
            _mm256_store_si256(reinterpret_cast<__m256i*>(d + t * 32),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)));
            uint16_t h;
            std::memcpy(&h, blk, 2);
            const float scale = _cvtsh_ss(h);
            std::memcpy(d + kTokenScales + t * 4, &scale, 4);
        }
    }
}

// Blocks [b0, b0 + nbc) of the panel of `rows` rows (16 or 32: whole groups)
// starting at w, as B tiles and float scales. A missing second group is zero.
template <DType W>
void pack_panel(const std::byte* w, size_t w_stride, int64_t rows, int64_t b0, int64_t nbc, std::byte* panel) noexcept {
    constexpr int64_t GB = 16 * (W == DType::Q8_0 ? 34 : 18);  // bytes of one interleaved block of a group
    const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    for (int64_t g = 0; g < 2; ++g) {
        const bool present = rows > g * 16;
        const std::byte* base = w + g * 16 * static_cast<int64_t>(w_stride);
        for (int64_t b = 0; b < nbc; ++b) {
            const std::byte* blk = base + (b0 + b) * GB;
            std::byte* tile = panel + b * kPanelBlockBytes + g * kPanelTileBytes;
            auto* scales = reinterpret_cast<float*>(panel + b * kPanelBlockBytes + kPanelScales) + g * 16;
            if (!present) {
                std::memset(tile, 0, kPanelTileBytes);
                _mm512_store_ps(scales, _mm512_setzero_ps());
                continue;
            }
            if constexpr (W == DType::Q8_0) {
                for (int q = 0; q < 8; ++q)
                    _mm512_store_si512(tile + 64 * q, _mm512_loadu_si512(blk + 32 + 64 * q));
            } else {
                // Quad i of a Q4_0 row holds elements 4i..4i+3 in its low
                // nibbles and 16+4i..16+4i+3 in its high ones: B rows i and 4+i.
                for (int i = 0; i < 4; ++i) {
                    const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * i);
                    const __m512i lo = _mm512_and_si512(v, low4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
                    _mm512_store_si512(tile + 64 * i, _mm512_sub_epi8(lo, eight));
                    _mm512_store_si512(tile + 64 * (4 + i), _mm512_sub_epi8(hi, eight));
                }
            }
            _mm512_store_ps(scales, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))));
        }
    }
}

// acc[t] += float(sums row t) * (dw * dx[t]) for the 16 tokens of a tile.
inline void scale_block_sums(const int32_t* sums, const float* dw, const float* dx, __m512 (&acc)[kTileTokens]) noexcept {
    const __m512 w = _mm512_load_ps(dw);
    for (int t = 0; t < kTileTokens; ++t) {
        const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * t));
        acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(w, _mm512_set1_ps(dx[t])), acc[t]);
    }
}

// One 16-token x 16-row result over nbc blocks: group g of the packed panel
// against one packed token tile; adds to out when `accumulate`.
void tile_gemm(int64_t nbc, const std::byte* panel, int g, const std::byte* tokens, float* out, int64_t out_stride,
               int64_t n_valid_tokens, bool accumulate) noexcept {
    alignas(64) int32_t sums[2][2][kTileTokens * 16];  // [pair parity][block of the pair]
    __m512 acc[kTileTokens];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const auto a_tile = [&](int64_t b) { return tokens + b * kTokenBlockBytes; };
    const auto b_tile = [&](int64_t b) { return panel + b * kPanelBlockBytes + g * kPanelTileBytes; };
    const auto dw = [&](int64_t b) {
        return reinterpret_cast<const float*>(panel + b * kPanelBlockBytes + kPanelScales) + g * 16;
    };
    const auto dx = [&](int64_t b) { return reinterpret_cast<const float*>(tokens + b * kTokenBlockBytes + kTokenScales); };
    // Software-pipelined by a pair of blocks: the tile products of blocks b,
    // b + 1 are issued, then the sums of the pair before are scaled, so that
    // the vector loads never wait on tile stores just issued.
    const auto issue = [&](int parity, int64_t b, int64_t n) {
        _tile_zero(0);
        _tile_loadd(2, a_tile(b), 32);
        _tile_loadd(4, b_tile(b), 64);
        _tile_dpbssd(0, 2, 4);
        _tile_stored(0, sums[parity][0], 64);
        if (n == 2) {
            _tile_zero(1);
            _tile_loadd(3, a_tile(b + 1), 32);
            _tile_loadd(5, b_tile(b + 1), 64);
            _tile_dpbssd(1, 3, 5);
            _tile_stored(1, sums[parity][1], 64);
        }
    };
    const auto finish = [&](int parity, int64_t b, int64_t n) {
        for (int64_t i = 0; i < n; ++i) scale_block_sums(sums[parity][i], dw(b + i), dx(b + i), acc);
    };
    int parity = 0;
    int64_t prev_b = 0, prev_n = 0;
    for (int64_t b = 0; b < nbc; b += 2) {
        const int64_t n = std::min<int64_t>(2, nbc - b);
        issue(parity, b, n);
        if (prev_n > 0) finish(parity ^ 1, prev_b, prev_n);
        prev_b = b, prev_n = n, parity ^= 1;
    }
    finish(parity ^ 1, prev_b, prev_n);
    for (int64_t t = 0; t < n_valid_tokens; ++t) {
        float* o = out + t * out_stride;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(acc[t], _mm512_loadu_ps(o)) : acc[t]);
    }
}

template <DType W>
bool amx_quant_gemm(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                    size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    const int64_t nb = k / 32;
    const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    const auto tokens_bytes = static_cast<size_t>(n_tiles * nb * kTokenBlockBytes);
    const auto panel_bytes = static_cast<size_t>(std::min(kChunkBlocks, nb) * kPanelBlockBytes);
    std::byte* tokens = thread_scratch(tokens_bytes + panel_bytes);
    if (tokens == nullptr) return false;
    std::byte* panel = tokens + tokens_bytes;
    pack_token_tiles(x, x_stride, n_tokens, nb, tokens);

    static constexpr AmxTileConfig kConfig = int8_tile_config(32);
    _tile_loadconfig(&kConfig);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t e) {
        for (int64_t p0 = a; p0 < e; p0 += kPanelRows) {
            const int64_t rows = std::min(kPanelRows, e - p0);
            for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
                const int64_t nbc = std::min(kChunkBlocks, nb - b0);
                pack_panel<W>(w + p0 * static_cast<int64_t>(w_stride), w_stride, rows, b0, nbc, panel);
                for (int64_t tile = 0; tile < n_tiles; ++tile) {
                    const int64_t valid = std::min(kTileTokens, n_tokens - tile * kTileTokens);
                    for (int g = 0; g * 16 < rows; ++g)
                        tile_gemm(nbc, panel, g, tokens + (tile * nb + b0) * kTokenBlockBytes,
                                  out + tile * kTileTokens * out_stride + p0 + g * 16, out_stride, valid, b0 > 0);
                }
            }
        }
    });
    _tile_release();
    return true;
}

// From this many tokens on the tiles run (below, the avx512-vnni kernels).
constexpr int64_t kAmxMinTokens = 16;

void amx_prepare_row(DType weight_type, const float* x, int64_t k, void* out) noexcept {
    avx512_vnni_matmul_kernels()->prepare_row(weight_type, x, k, out);
}

void amx_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1, const void* x,
                size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    assert_matmul_args(type, k, r0, r1, n_tokens, out_stride, out);
    if (n_tokens >= kAmxMinTokens && k > 0 && r0 < r1) {
        const auto* wb = static_cast<const std::byte*>(w);
        const auto* xb = static_cast<const std::byte*>(x);
        bool done = false;
        if (type == DType::Q8_0_R16)
            done = amx_quant_gemm<DType::Q8_0>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        else if (type == DType::Q4_0_R16)
            done = amx_quant_gemm<DType::Q4_0>(k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
        else if (is_kquant(quant::is_interleaved(type) ? quant::plain_type(type) : type))
            done = amx_kquant_gemm(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        if (done) return;
    }
    avx512_vnni_matmul_kernels()->matmul(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
}

}  // namespace

bool amx_matmul_built() noexcept { return true; }

const MatmulKernels* amx_matmul_kernels() noexcept {
    static const MatmulKernels* const set = []() -> const MatmulKernels* {
        const MatmulKernels* vnni = avx512_vnni_matmul_kernels();
        if (vnni == nullptr || !amx_support().int8) return nullptr;
        static const MatmulKernels amx{"amx", amx_prepare_row, amx_matmul, vnni->interleaved_layouts};
        return &amx;
    }();
    return set;
}

}  // namespace kiln::kernels::detail

#else  // !KILN_HAVE_AMX_INT8

namespace kiln::kernels::detail {
bool amx_matmul_built() noexcept { return false; }
const MatmulKernels* amx_matmul_kernels() noexcept { return nullptr; }
}  // namespace kiln::kernels::detail

#endif
