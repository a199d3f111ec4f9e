// The K-quant GEMM of the "avx2" set: Q2_K..Q6_K weights against many
// Q8_K-prepared tokens (prompt processing). The layout is that of
// matmul_avx512_kquant_gemm.cpp; the products differ, as AVX2 has no vpdpbusd
// (and AVX-VNNI is not assumed: this set runs on any AVX2 CPU).
//
// Each weight super-block is unpacked once per 32-row chunk into a panel
// (codes as u8 in element order, the sub-block scales as int16 pairs (s, s),
// the bsum-term weights as int16 pairs, d and dmin), and tokens sit in the
// lanes: activations are packed once per call into tiles of up to 2 x 8
// tokens, one 4-byte quad of codes per token per 32-bit lane. The micro-kernel
// (4 rows x 2 vectors) broadcasts one quad of a weight row (u8) against vectors
// of token quads (s8): no weight transpose, and each unpacked byte meets 16
// tokens. (2 x 4, 4 x 3, 8 x 1 and 2 x 2 measured 3-8% slower.)
//
// vpmaddubsw gives each token lane two int16 (w0 x0 + w1 x1, w2 x2 + w3 x3),
// each at most 2 x 63 x 128 in magnitude, so the pairs of as many quads as keep
// the sum within int16 (2 for Q6_K, 4 for Q5_K, a whole sub-block for the
// others) are added in int16, exactly; one vpmaddwd by the sub-block's (s, s)
// pair then folds both halves and the scale into int32, summed over the
// super-block: one vpaddw per vpmaddubsw instead of a vpmaddwd and a vpaddd.
// The bsum term (mins, or the -4 / -32 offsets of Q3_K / Q6_K) is one vpmaddwd
// per pair of bsum groups (of 32 elements for Q4_K/Q5_K, whose mins are per
// 32; else of 16), computed before the products so that its sums and theirs
// are never live together. All integer sums are exact: per super-block the
// float arithmetic is cvt(isum) * (d * dx) less cvt(bsum term) * (dmin * dx)
// for Q2_K/Q4_K/Q5_K, and cvt(isum - offset term) * (d * dx) for Q3_K/Q6_K;
// only the float sum over super-blocks is ordered differently from the scalar
// set. Each row's arithmetic is the same whatever panel, chunk or thread
// computes it. Interleaved weights (Q4_K_R16, Q5_K_R16, Q6_K_R16, Q6_K_R16B)
// are unpacked from their groups' blocks, so they give the plain weights' bits.
#include "engine/kernels/matmul_avx2_kquants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/matmul_avx2_kquant_unpack.h"
#include "engine/quant/blocks.h"
#include "engine/quant/interleave.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

namespace kiln::kernels::detail {
namespace {

using namespace avx2_kquant;

// One unpacked super-block of one row in a panel.
struct alignas(64) PanelBlock {
    uint8_t codes[256];        // unsigned codes in element order
    int32_t scale_pairs[16];   // per 16-element group (Q4_K/Q5_K use the even ones, per 32)
    int32_t corr_pairs[8];     // bsum-term weights of bsum groups 2j, 2j+1 as an int16 pair
    float d, dmin;
    uint8_t pad[384 - 256 - 64 - 32 - 8];
};
static_assert(sizeof(PanelBlock) == 384);

constexpr int kPanelRows = 4;       // rows per micro-kernel
constexpr int kTileVectors = 2;     // token vectors per micro-kernel
constexpr int64_t kChunkRows = 32;  // rows unpacked together (the row tile)
constexpr int kVecTokens = 8;
constexpr int64_t kTileTokens = kTileVectors * kVecTokens;

// Per super-block of a token tile of V x 8 tokens: 64 quads x V vectors of
// codes, up to 8 bsum pairs x V vectors, V vectors of scales.
template <int V>
struct TileLayout {
    static constexpr int64_t kCodes = 0;
    static constexpr int64_t kPairs = 64 * V * 32;
    static constexpr int64_t kScales = kPairs + 8 * V * 32;
    static constexpr int64_t kBytes = kScales + V * 32;
};

template <DType T>
constexpr int kElementsPerScale = T == DType::Q4_K || T == DType::Q5_K ? 32 : 16;
template <DType T>
constexpr int kMaxCode = T == DType::Q2_K ? 3 : T == DType::Q3_K ? 7 : T == DType::Q4_K ? 15 : T == DType::Q5_K ? 31 : 63;
// Quads whose vpmaddubsw pairs are summed in int16: no more than one scale's
// worth, and each pair is at most 2 x kMaxCode x 128 in magnitude (activation
// codes are in [-127, 127]; 128 leaves -128 safe too).
template <DType T>
constexpr int kQuadsPerSum = std::min(kElementsPerScale<T> / 4, 32767 / (2 * kMaxCode<T> * 128));
// Pairs of bsum groups per super-block. Q4_K/Q5_K's mins are per 32 elements,
// so their tiles carry sums of 32 codes (at most 32 x 127, still int16): half
// the products of groups of 16.
template <DType T>
constexpr int kBsumPairs = kElementsPerScale<T> == 32 ? 4 : 8;

// A block's scales, bsum-term weights, d and dmin into p (not its codes).
template <DType T>
void unpack_scales(const std::byte* blk, PanelBlock& p) noexcept {
    const Scales s = block_scales<T>(blk);
    const __m128i lo = _mm_cvtepi8_epi16(s.scales8), hi = _mm_cvtepi8_epi16(_mm_srli_si128(s.scales8, 8));
    auto* pairs = reinterpret_cast<__m128i*>(p.scale_pairs);
    _mm_store_si128(pairs + 0, _mm_unpacklo_epi16(lo, lo));
    _mm_store_si128(pairs + 1, _mm_unpackhi_epi16(lo, lo));
    _mm_store_si128(pairs + 2, _mm_unpacklo_epi16(hi, hi));
    _mm_store_si128(pairs + 3, _mm_unpackhi_epi16(hi, hi));
    alignas(32) int16_t corr[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(corr), s.corr);
    if constexpr (kBsumPairs<T> == 4) {
        // corr repeats each sub-block's min for its two halves: take one of each.
        for (int j = 0; j < 4; ++j)
            p.corr_pairs[j] = static_cast<uint16_t>(corr[4 * j]) | static_cast<int32_t>(corr[4 * j + 2]) << 16;
    } else {
        std::memcpy(p.corr_pairs, corr, sizeof(corr));
    }
    p.d = s.d;
    p.dmin = s.dmin;
}

template <DType T>
void unpack_block(const std::byte* blk, PanelBlock& p) noexcept {
    for (int c = 0; c < 8; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(p.codes + 32 * c), chunk_codes<T>(blk, c));
    unpack_scales<T>(blk, p);
}

// Interleaved weights (quant/interleave.h) back to 16 plain blocks. Their
// code quads are an 8 x 8 transpose of 32-bit words per 8 quads and 8 rows
// (quad q of row r at 64 q + 4 r in the group's super-block, at 4 q in the
// row's array); the scales and fp16 fields are copied word by word.
inline void transpose_quads(const std::byte* src, int quads, std::byte* plain, int64_t block_bytes,
                            int64_t plain_at) noexcept {
    for (int q0 = 0; q0 < quads; q0 += 8)
        for (int h = 0; h < 2; ++h) {
            __m256i v[8];
            for (int j = 0; j < 8; ++j) v[j] = load256(src + 64 * (q0 + j) + 32 * h);
            __m256i t[8], u[8];
            for (int j = 0; j < 8; j += 2) {
                t[j] = _mm256_unpacklo_epi32(v[j], v[j + 1]);
                t[j + 1] = _mm256_unpackhi_epi32(v[j], v[j + 1]);
            }
            for (int j = 0; j < 8; j += 4) {
                u[j] = _mm256_unpacklo_epi64(t[j], t[j + 2]);      // rows 0 | 4
                u[j + 1] = _mm256_unpackhi_epi64(t[j], t[j + 2]);  // rows 1 | 5
                u[j + 2] = _mm256_unpacklo_epi64(t[j + 1], t[j + 3]);  // rows 2 | 6
                u[j + 3] = _mm256_unpackhi_epi64(t[j + 1], t[j + 3]);  // rows 3 | 7
            }
            for (int r = 0; r < 4; ++r) {
                std::byte* lo = plain + (8 * h + r) * block_bytes + plain_at + 4 * q0;
                std::byte* hi = plain + (8 * h + r + 4) * block_bytes + plain_at + 4 * q0;
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm256_permute2x128_si256(u[r], u[r + 4], 0x20));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm256_permute2x128_si256(u[r], u[r + 4], 0x31));
            }
        }
}
inline void copy_words(const std::byte* src, int words, int width, std::byte* plain, int64_t block_bytes,
                       int64_t plain_at) noexcept {
    for (int w = 0; w < words; ++w)
        for (int r = 0; r < 16; ++r)
            std::memcpy(plain + r * block_bytes + plain_at + width * w, src + 16 * width * w + width * r,
                        static_cast<size_t>(width));
}

template <DType T>
constexpr bool kHasInterleaved = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

template <DType T>
    requires kHasInterleaved<T>
void deinterleave_group_block(const std::byte* gb, std::byte* plain) noexcept {
    constexpr int64_t BB = kBlockBytes<T>;
    if constexpr (T == DType::Q6_K) {
        copy_words(gb, 1, 2, plain, BB, offsetof(quant::BlockQ6_K, d));
        copy_words(gb + 32, 4, 4, plain, BB, offsetof(quant::BlockQ6_K, scales));
        transpose_quads(gb + 288, 32, plain, BB, offsetof(quant::BlockQ6_K, ql));
        transpose_quads(gb + 2336, 16, plain, BB, offsetof(quant::BlockQ6_K, qh));
    } else {
        copy_words(gb, 1, 2, plain, BB, 0);        // d
        copy_words(gb + 32, 1, 2, plain, BB, 2);   // dmin
        copy_words(gb + 64, 3, 4, plain, BB, 4);   // the 12 scale bytes
        if constexpr (T == DType::Q5_K) {
            transpose_quads(gb + 256, 8, plain, BB, offsetof(quant::BlockQ5_K, qh));
            transpose_quads(gb + 768, 32, plain, BB, offsetof(quant::BlockQ5_K, qs));
        } else {
            transpose_quads(gb + 256, 32, plain, BB, offsetof(quant::BlockQ4_K, qs));
        }
    }
}

// A Q6_K_R16B group's super-block (quant/interleave.h) into the panel blocks
// of its 16 rows. The codes are decoded where they lie, 8 rows to a vector as
// the decode kernel does (three quads' low 6 bits, the fourth from their
// tops), into the 64 quads of each row in element order, which one transpose
// turns into rows; d and the scales go through plain blocks that hold only
// them.
template <class PanelOf>
void unpack_q6_k_r16b_group_block(const std::byte* gb, PanelOf&& panel_of) noexcept {
    constexpr int64_t BB = kBlockBytes<DType::Q6_K>;
    alignas(32) std::byte headers[16 * BB];
    copy_words(gb, 1, 2, headers, BB, offsetof(quant::BlockQ6_K, d));
    copy_words(gb + 32, 4, 4, headers, BB, offsetof(quant::BlockQ6_K, scales));
    alignas(32) std::byte quads[64 * 64];  // quad 4 s + u of row r at 64 (4 s + u) + 4 r
    const __m256i low6 = _mm256_set1_epi8(0x3F);
    for (int s = 0; s < 16; ++s)
        for (int h = 0; h < 2; ++h) {
            const std::byte* p = gb + 288 + 3 * s * 64 + 32 * h;
            const __m256i a = load256(p), b = load256(p + 64), c = load256(p + 128);
            const __m256i fourth = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(low6, a), 6),
                                                                   _mm256_srli_epi16(_mm256_andnot_si256(low6, b), 4)),
                                                   _mm256_srli_epi16(_mm256_andnot_si256(low6, c), 2));
            auto* q = reinterpret_cast<__m256i*>(quads + 4 * s * 64 + 32 * h);
            _mm256_store_si256(q, _mm256_and_si256(a, low6));
            _mm256_store_si256(q + 2, _mm256_and_si256(b, low6));
            _mm256_store_si256(q + 4, _mm256_and_si256(c, low6));
            _mm256_store_si256(q + 6, fourth);
        }
    alignas(32) std::byte codes[16 * 256];
    transpose_quads(quads, 64, codes, 256, 0);
    for (int r = 0; r < 16; ++r) {
        PanelBlock& p = panel_of(r);
        std::memcpy(p.codes, codes + 256 * r, 256);
        unpack_scales<DType::Q6_K>(headers + r * BB, p);
    }
}

// Unpacks rows [0, rows) of a chunk into panels of kPanelRows rows, blocks of a
// panel's rows side by side; rows past `rows` are zero (their results are
// dropped). Interleaved chunks hold whole groups (their row ranges are
// multiples of 16).
template <DType T>
void unpack_chunk(const std::byte* w, size_t w_stride, DType layout, int rows, int64_t nb, PanelBlock* panels) noexcept {
    const auto panel_block = [&](int r, int64_t i) -> PanelBlock& {
        return panels[(r / kPanelRows) * nb * kPanelRows + i * kPanelRows + r % kPanelRows];
    };
    if constexpr (kHasInterleaved<T>) {
        if (T == DType::Q6_K && layout == DType::Q6_K_R16B) {
            for (int g = 0; g < rows; g += 16) {
                const std::byte* group = w + g * static_cast<int64_t>(w_stride);
                for (int64_t i = 0; i < nb; ++i)
                    unpack_q6_k_r16b_group_block(group + i * 16 * kBlockBytes<T>,
                                                 [&](int r) -> PanelBlock& { return panel_block(g + r, i); });
            }
            return;
        }
        if (quant::is_interleaved(layout)) {
            constexpr int64_t BB = kBlockBytes<T>;
            alignas(32) std::byte plain[16 * BB];
            for (int g = 0; g < rows; g += 16) {
                const std::byte* group = w + g * static_cast<int64_t>(w_stride);
                for (int64_t i = 0; i < nb; ++i) {
                    deinterleave_group_block<T>(group + i * 16 * BB, plain);
                    for (int r = 0; r < 16; ++r) unpack_block<T>(plain + r * BB, panel_block(g + r, i));
                }
            }
            return;  // whole groups: no padding rows
        }
    }
    for (int r = 0; r < rows; ++r)
        for (int64_t i = 0; i < nb; ++i)
            unpack_block<T>(w + r * static_cast<int64_t>(w_stride) + i * kBlockBytes<T>, panel_block(r, i));
    const int padded = (rows + kPanelRows - 1) / kPanelRows * kPanelRows;
    for (int r = rows; r < padded; ++r)
        for (int64_t i = 0; i < nb; ++i) std::memset(&panel_block(r, i), 0, sizeof(PanelBlock));
}

// Packs tokens [t0, t0 + nt) (nt <= V x 8) of the prepared Q8_K rows into one
// tile for T's weights; missing tokens are zero.
template <DType T, int V>
void pack_tile(const std::byte* x, size_t x_stride, int64_t t0, int nt, int64_t nb, std::byte* tile) noexcept {
    using L = TileLayout<V>;
    std::memset(tile, 0, static_cast<size_t>(nb * L::kBytes));
    for (int t = 0; t < nt; ++t) {
        const std::byte* row = x + (t0 + t) * static_cast<int64_t>(x_stride);
        const int v = t / kVecTokens, lane = t % kVecTokens;
        for (int64_t i = 0; i < nb; ++i) {
            const std::byte* xb = row + i * kXBytes;
            std::byte* d = tile + i * L::kBytes;
            for (int q = 0; q < 64; ++q) std::memcpy(d + L::kCodes + (q * V + v) * 32 + 4 * lane, xb + kXCodes + 4 * q, 4);
            int16_t bsums[16];
            std::memcpy(bsums, xb + kXBsums, sizeof(bsums));
            if constexpr (kBsumPairs<T> == 4)
                for (int g = 0; g < 8; ++g) bsums[g] = static_cast<int16_t>(bsums[2 * g] + bsums[2 * g + 1]);
            for (int j = 0; j < kBsumPairs<T>; ++j)
                std::memcpy(d + L::kPairs + (j * V + v) * 32 + 4 * lane, bsums + 2 * j, 4);
            std::memcpy(d + L::kScales + v * 32 + 4 * lane, xb, 4);
        }
    }
}

// res[t * kChunkRows + r] for the panel's kPanelRows rows and the tile's V x 8 tokens.
template <DType T, int V>
void gemm_tile(int64_t nb, const PanelBlock* panel, const std::byte* tile, float* res) noexcept {
    using L = TileLayout<V>;
    constexpr int R = kPanelRows;
    constexpr int kRun = kQuadsPerSum<T>;
    __m256 acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const PanelBlock* pb = panel + i * R;
        const std::byte* xb = tile + i * L::kBytes;
        // The bsum term first, while the products' sums hold no registers: the
        // min term goes into acc at once, the offset term starts isum.
        __m256i isum[R][V];
        {
            __m256i corr[R][V];
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v) corr[r][v] = _mm256_setzero_si256();
            // Rolled: unrolled, the compiler regroups the sums (see the saturating adds below).
#pragma GCC unroll 1
            for (int j = 0; j < kBsumPairs<T>; ++j) {
                __m256i bsum_pairs[V];
                for (int v = 0; v < V; ++v) bsum_pairs[v] = load256(xb + L::kPairs + (j * V + v) * 32);
                for (int r = 0; r < R; ++r) {
                    const __m256i weights = _mm256_set1_epi32(pb[r].corr_pairs[j]);
                    for (int v = 0; v < V; ++v) {
                        const __m256i term = _mm256_madd_epi16(bsum_pairs[v], weights);
                        corr[r][v] = _mm256_add_epi32(corr[r][v], term);
                    }
                }
            }
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v) {
                    if constexpr (kHasMin<T>) {
                        const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(xb + L::kScales + v * 32));
                        acc[r][v] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr[r][v]),
                                                     _mm256_mul_ps(_mm256_set1_ps(pb[r].dmin), dx), acc[r][v]);
                        isum[r][v] = _mm256_setzero_si256();
                    } else {
                        isum[r][v] = _mm256_sub_epi32(_mm256_setzero_si256(), corr[r][v]);
                    }
                }
        }
        // A rolled loop: unrolled, the compiler interleaves runs and spills.
#pragma GCC unroll 1
        for (int run = 0; run < 64 / kRun; ++run) {
            __m256i pairs[R][V];
#pragma GCC unroll 8
            for (int j = 0; j < kRun; ++j) {
                const int q = run * kRun + j;
                __m256i xq[V];
                for (int v = 0; v < V; ++v) xq[v] = load256(xb + L::kCodes + (q * V + v) * 32);
                for (int r = 0; r < R; ++r) {
                    const __m256i wq = bcast32(pb[r].codes + 4 * q);
                    for (int v = 0; v < V; ++v) {
                        const __m256i prod = _mm256_maddubs_epi16(wq, xq[v]);
                        // Saturating adds, though the sums fit: the compiler may regroup a
                        // chain of plain adds into a tree that holds every product at once,
                        // which spills.
                        pairs[r][v] = j == 0 ? prod : _mm256_adds_epi16(pairs[r][v], prod);
                    }
                }
            }
            // The run's 4 x kRun elements lie in one scale's group.
            for (int r = 0; r < R; ++r) {
                const __m256i s = _mm256_set1_epi32(pb[r].scale_pairs[run * kRun / 4]);
                for (int v = 0; v < V; ++v) {
                    const __m256i scaled = _mm256_madd_epi16(pairs[r][v], s);
                    isum[r][v] = _mm256_add_epi32(isum[r][v], scaled);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) {
                const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(xb + L::kScales + v * 32));
                acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][v]), _mm256_mul_ps(_mm256_set1_ps(pb[r].d), dx),
                                            acc[r][v]);
            }
    }
    // Token-major results of the chunk's rows: a token's are kChunkRows floats apart.
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) {
            alignas(32) float lanes[kVecTokens];
            _mm256_store_ps(lanes, acc[r][v]);
            for (int lane = 0; lane < kVecTokens; ++lane) res[(v * kVecTokens + lane) * kChunkRows + r] = lanes[lane];
        }
}

using TileFn = void (*)(int64_t, const PanelBlock*, const std::byte*, float*) noexcept;
using PackFn = void (*)(const std::byte*, size_t, int64_t, int, int64_t, std::byte*) noexcept;

// Indexed by the tile's vector count less one: full tiles take kTileVectors,
// the last one as few as hold its tokens.
template <DType T, size_t... V>
constexpr std::array<TileFn, sizeof...(V)> tile_table(std::index_sequence<V...>) noexcept {
    return {gemm_tile<T, static_cast<int>(V) + 1>...};
}
template <DType T, size_t... V>
constexpr std::array<PackFn, sizeof...(V)> pack_table(std::index_sequence<V...>) noexcept {
    return {pack_tile<T, static_cast<int>(V) + 1>...};
}

// Tiles of a token block stay in L2 while every panel of a chunk passes them.
constexpr int64_t kTokenBlockBytes = 192 * 1024;

template <DType T>
bool kquant_gemm(DType layout, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                 size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    static constexpr auto kTiles = tile_table<T>(std::make_index_sequence<kTileVectors>{});
    static constexpr auto kPacks = pack_table<T>(std::make_index_sequence<kTileVectors>{});
    if (!has_claimable_rows(r0, r1, claims)) return true;
    const int64_t nb = k / 256;
    const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    const int64_t tile_bytes = nb * TileLayout<kTileVectors>::kBytes;
    const auto tiles_bytes = round_up(static_cast<size_t>(n_tiles * tile_bytes), 64);
    const auto panels_bytes = static_cast<size_t>(kChunkRows * nb) * sizeof(PanelBlock);
    const int64_t block_tiles = std::max<int64_t>(1, kTokenBlockBytes / tile_bytes);
    const auto results_bytes = static_cast<size_t>(block_tiles * kTileTokens * kChunkRows) * sizeof(float);
    std::byte* tiles = thread_scratch(tiles_bytes + panels_bytes + results_bytes);
    if (tiles == nullptr) return false;
    auto* panels = reinterpret_cast<PanelBlock*>(tiles + tiles_bytes);
    auto* results = reinterpret_cast<float*>(tiles + tiles_bytes + panels_bytes);
    const auto tile_tokens = [&](int64_t tile) { return std::min(kTileTokens, n_tokens - tile * kTileTokens); };
    const auto tile_vectors = [&](int64_t tile) { return (tile_tokens(tile) + kVecTokens - 1) / kVecTokens; };
    for (int64_t tile = 0; tile < n_tiles; ++tile)
        kPacks[tile_vectors(tile) - 1](x, x_stride, tile * kTileTokens, static_cast<int>(tile_tokens(tile)), nb,
                                       tiles + tile * tile_bytes);

    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t c0 = a; c0 < b; c0 += kChunkRows) {
            const int rows = static_cast<int>(std::min(kChunkRows, b - c0));
            unpack_chunk<T>(w + c0 * static_cast<int64_t>(w_stride), w_stride, layout, rows, nb, panels);
            for (int64_t tb = 0; tb < n_tiles; tb += block_tiles) {
                const int64_t tb_end = std::min(n_tiles, tb + block_tiles);
                for (int p = 0; p * kPanelRows < rows; ++p) {
                    const PanelBlock* panel = panels + p * nb * kPanelRows;
                    for (int64_t tile = tb; tile < tb_end; ++tile)
                        kTiles[tile_vectors(tile) - 1](nb, panel, tiles + tile * tile_bytes,
                                                       results + (tile - tb) * kTileTokens * kChunkRows + p * kPanelRows);
                }
                // The block's results, one contiguous run of `rows` floats per token.
                for (int64_t tile = tb; tile < tb_end; ++tile)
                    for (int64_t t = 0; t < tile_tokens(tile); ++t)
                        std::memcpy(out + (tile * kTileTokens + t) * out_stride + c0,
                                    results + ((tile - tb) * kTileTokens + t) * kChunkRows,
                                    static_cast<size_t>(rows) * sizeof(float));
            }
        }
    });
    return true;
}

}  // namespace

bool avx2_kquant_gemm(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
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

#endif
