// The "avx2" set's GEMM of the 32-element block types: prompt batches of
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL weights, laid out
// as the K-quant GEMM (matmul_avx2_kquant_gemm.cpp): tokens in the lanes. The
// activations are packed once per call, 8 tokens to a vector; a weight row's
// codes are broadcast against a vector of the tokens' codes, so one product
// instruction meets 8 tokens at once and no instruction goes to the per-pair
// sign shuffles of the tiles (about 7 instructions per 32 multiply-adds there:
// Q8_0 and Q4_0 pp512 ran at 36% and 31% of this set's int8 peak by kiln-bench
// --compute-roofline, against 84% for Q4_K_M).
//
// Unsigned codes (Q4_0, Q4_1: 0..15; Q5_0, Q5_1: 0..31; block_gemm) go as
// 4-byte quads, one token per 32-bit lane, into vpmaddubsw against the signed
// activation codes. A quad's two int16 pair sums are at most 2 x 15 x 128 (4
// bits) or 2 x 31 x 128 (5 bits), so 8 or 4 quads add exactly in int16 before
// one vpmaddwd by ones folds them to int32. Q4_0 and Q5_0 then subtract 8 or 16
// times the token's code sum (their offsets): exactly the int32 block dot of
// the tiles (matmul_avx2.cpp). Signed codes (Q8_0, IQ4_NL's table values;
// pair_gemm) would need the sign trick per product and a vpmaddwd per quad;
// they go as int16 pairs into vpmaddwd instead (see there). Per block and
// token lane: one float multiply-add of the exact int32 dot by d_w x d_x, and
// for Q4_1/Q5_1 one of the minimum by the token's s, in block order: each
// (row, token) result is the same whatever rows, tokens, chunk or thread it is
// computed with. Interleaved Q8_0_R16 and Q4_0_R16 rows are gathered back to
// plain blocks as the panel is unpacked (once per row and call), so they give
// the plain rows' bits.
#include "engine/kernels/matmul_avx2_block_gemm.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/matmul_avx2_blocks.h"

#include <algorithm>
#include <cstring>

#include "engine/quant/interleave.h"

namespace kiln::kernels::detail {
namespace {

using namespace avx2_blocks;

constexpr int kGemmRows = 4;
constexpr int kGemmVectors = 2;  // token vectors per micro-kernel: 2 measured 0-8% above 1

// Signed codes take the int16 pairs (pair_gemm), unsigned ones the quads (block_gemm).
template <DType W>
constexpr bool kSignedCodes = W == DType::Q8_0 || W == DType::IQ4_NL;
template <DType W>
constexpr int kCodeOffset = W == DType::Q4_0 ? 8 : W == DType::Q5_0 ? 16 : 0;
// Quads whose int16 pair sums may be added before widening (see above).
template <DType W>
constexpr int kQuadsPerWiden = (W == DType::Q5_0 || W == DType::Q5_1) ? 4 : 8;

struct PackedTokens {
    int64_t nb = 0, vectors = 0;
    const int8_t* quads = nullptr;  // [vector][block][quad 0..7][lane 0..7][4 bytes]
    const float* scales = nullptr;  // [vector][block][lane]
    const int32_t* sums = nullptr;  // [vector][block][lane]: Σ codes (the offset term)
    const float* s = nullptr;       // [vector][block][lane]: Q8_1's s (the minimum term)
};

size_t packed_tokens_bytes(int64_t k, int64_t n_tokens) noexcept {
    const int64_t vectors = (n_tokens + 7) / 8, nb = k / 32;
    return static_cast<size_t>(vectors * nb) * (256 + 3 * 32);
}

// The weight panel of kGemmRows rows: their (unsigned) codes, then their
// block scales, then their block minimums.
struct Panel {
    uint8_t* codes;
    float* scales;
    float* mins;
};
size_t panel_bytes(int64_t k) noexcept { return static_cast<size_t>(kGemmRows * k) + static_cast<size_t>(kGemmRows * k / 32) * 8; }
Panel panel_at(std::byte* p, int64_t k) noexcept {
    auto* scales = reinterpret_cast<float*>(p + static_cast<size_t>(kGemmRows * k));
    return {reinterpret_cast<uint8_t*>(p), scales, scales + kGemmRows * k / 32};
}

// Calls f(vb, b, lane, t) for every lane of every (token vector, block) of a
// packing: vb = v * nb + b, t = 8 v + lane (t >= n_tokens: a padding lane).
template <class F>
void for_each_token_lane(int64_t vectors, int64_t nb, F&& f) {
    for (int64_t v = 0; v < vectors; ++v)
        for (int64_t b = 0; b < nb; ++b)
            for (int lane = 0; lane < 8; ++lane) f(static_cast<size_t>(v * nb + b), b, lane, v * 8 + lane);
}

// Packs n_tokens prepared rows (Q8_0, or Q8_1 for W with a minimum) into
// `scratch` (packed_tokens_bytes of it).
template <DType W>
PackedTokens pack_tokens(int64_t k, const std::byte* x, size_t x_stride, int64_t n_tokens, std::byte* scratch) noexcept {
    PackedTokens p;
    p.nb = k / 32;
    p.vectors = (n_tokens + 7) / 8;
    const auto blocks = static_cast<size_t>(p.vectors * p.nb);
    auto* quads = reinterpret_cast<int8_t*>(scratch);
    auto* scales = reinterpret_cast<float*>(scratch + blocks * 256);
    auto* sums = reinterpret_cast<int32_t*>(scratch + blocks * (256 + 32));
    auto* s = reinterpret_cast<float*>(scratch + blocks * (256 + 64));
    for_each_token_lane(p.vectors, p.nb, [&](size_t vb, int64_t b, int lane, int64_t t) {
        int8_t* dst = quads + vb * 256;
        const size_t at = vb * 8 + static_cast<size_t>(lane);
        if (t >= n_tokens) {  // padding: zero codes and scales, never stored
            for (int q = 0; q < 8; ++q) std::memset(dst + q * 32 + lane * 4, 0, 4);
            scales[at] = 0.0f;
            sums[at] = 0;
            s[at] = 0.0f;
            return;
        }
        const std::byte* blk = x + t * static_cast<int64_t>(x_stride) + b * kActBytes<W>;
        const auto* codes = reinterpret_cast<const int8_t*>(blk + kActCodes<W>);
        int32_t sum = 0;
        for (int e = 0; e < 32; ++e) sum += codes[e];
        for (int q = 0; q < 8; ++q) std::memcpy(dst + q * 32 + lane * 4, codes + q * 4, 4);
        scales[at] = half_at(blk);
        sums[at] = sum;
        s[at] = kHasMinimum<W> ? half_at(blk + 2) : 0.0f;
    });
    p.quads = quads;
    p.scales = scales;
    p.sums = sums;
    p.s = s;
    return p;
}

// A weight block's codes for the GEMM: unsigned (no offset) for the types of 4
// and 5 bits, the signed values for Q8_0 and IQ4_NL.
template <DType W>
inline __m256i gemm_codes(const std::byte* blk) noexcept {
    if constexpr (W == DType::Q4_0) return unpack_nibbles(blk + 2);
    else if constexpr (W == DType::Q5_0) return _mm256_or_si256(unpack_nibbles(blk + 6), fifth_bits(blk + 2));
    else return load_codes<W>(blk);  // Q8_0, IQ4_NL: signed; Q4_1, Q5_1: unsigned
}

// The weight matrix: plain rows, or (Q8_0_R16, Q4_0_R16) groups of 16
// interleaved rows, whose blocks are gathered back to the plain layout
// (quant/interleave.h's, written out here: through deinterleaved_block the
// gathering cost Q4_0's pp128 20%).
struct WeightRows {
    const std::byte* w;
    size_t stride;
    bool interleaved;

    template <DType W>
    const std::byte* block(int64_t row, int64_t b, std::byte* scratch) const noexcept {
        constexpr int64_t BB = kBlockBytes<W>;
        if constexpr (W == DType::Q8_0 || W == DType::Q4_0) {
            if (interleaved) {
                // Per group and block: the 16 rows' fp16 d, then quad q of row r at 32 + 64 q + 4 r.
                constexpr int kQuads = W == DType::Q8_0 ? 8 : 4;
                const int64_t in_group = row % quant::kInterleaveRows;
                const std::byte* g = w + (row - in_group) * static_cast<int64_t>(stride) + b * quant::kInterleaveRows * BB;
                std::memcpy(scratch, g + 2 * in_group, 2);
                for (int q = 0; q < kQuads; ++q) std::memcpy(scratch + 2 + 4 * q, g + 32 + 64 * q + 4 * in_group, 4);
                return scratch;
            }
        }
        return w + row * static_cast<int64_t>(stride) + b * BB;
    }
};

// R rows (R <= kGemmRows) from `first` on against every packed token: out[t * out_stride + r].
template <DType W, int R>
void gemm_rows(const WeightRows& m, int64_t first, const PackedTokens& p, Panel panel, int64_t n_tokens, float* out,
               int64_t out_stride) noexcept {
    // The rows' codes, unpacked once for all the token vectors.
    const int64_t nb = p.nb, k = nb * 32;
    static_assert(!kSignedCodes<W>);
    const size_t per_row = static_cast<size_t>(k);
    alignas(32) std::byte gathered[64];
    for (int r = 0; r < R; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* blk = m.template block<W>(first + r, b, gathered);
            uint8_t* dst = panel.codes + r * per_row + static_cast<size_t>(b * 32);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), gemm_codes<W>(blk));
            panel.scales[r * nb + b] = half_at(blk);
            if constexpr (kHasMinimum<W>) panel.mins[r * nb + b] = half_at(blk + 2);
        }
    const __m256i ones = _mm256_set1_epi16(1);
    const auto vectors = [&]<int V>(int64_t v0) {
        __m256 acc[R][V];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            __m256i dot[R][V];
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v) dot[r][v] = _mm256_setzero_si256();
            for (int q0 = 0; q0 < 8; q0 += kQuadsPerWiden<W>) {
                __m256i pairs[R][V];
                for (int r = 0; r < R; ++r)
                    for (int v = 0; v < V; ++v) pairs[r][v] = _mm256_setzero_si256();
                for (int q = q0; q < q0 + kQuadsPerWiden<W>; ++q) {
                    __m256i xv[V];
                    for (int v = 0; v < V; ++v)
                        xv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.quads + ((v0 + v) * nb + b) * 256 + q * 32));
                    for (int r = 0; r < R; ++r) {
                        const uint8_t* row = panel.codes + r * per_row + static_cast<size_t>(b * 32 + q * 4);
                        int32_t quad;
                        std::memcpy(&quad, row, 4);
                        const __m256i wq = _mm256_set1_epi32(quad);
                        for (int v = 0; v < V; ++v) {
                            pairs[r][v] = _mm256_add_epi16(pairs[r][v], _mm256_maddubs_epi16(wq, xv[v]));
                            // Keeps each sum in its register: else GCC reassociates the
                            // adds into trees and spills the products (Q4_0's GEMM ran 27% slower).
                            __asm__("" : "+x"(pairs[r][v]));
                        }
                    }
                }
                for (int r = 0; r < R; ++r)
                    for (int v = 0; v < V; ++v) dot[r][v] = _mm256_add_epi32(dot[r][v], _mm256_madd_epi16(pairs[r][v], ones));
            }
            for (int v = 0; v < V; ++v) {
                const size_t vb = static_cast<size_t>((v0 + v) * nb + b);
                const __m256 dx = _mm256_loadu_ps(p.scales + vb * 8);
                __m256i offset = _mm256_setzero_si256();
                if constexpr (kCodeOffset<W> != 0)
                    offset = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sums + vb * 8)),
                                                _mm256_set1_epi32(kCodeOffset<W>));
                for (int r = 0; r < R; ++r) {
                    const __m256i exact = kCodeOffset<W> != 0 ? _mm256_sub_epi32(dot[r][v], offset) : dot[r][v];
                    const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(panel.scales[r * nb + b]), dx);
                    acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), scale, acc[r][v]);
                    if constexpr (kHasMinimum<W>)
                        acc[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(panel.mins[r * nb + b]), _mm256_loadu_ps(p.s + vb * 8), acc[r][v]);
                }
            }
        }
        for (int v = 0; v < V; ++v)
            for (int r = 0; r < R; ++r) {
                alignas(32) float lanes[8];
                _mm256_store_ps(lanes, acc[r][v]);
                for (int lane = 0; lane < 8 && (v0 + v) * 8 + lane < n_tokens; ++lane)
                    out[((v0 + v) * 8 + lane) * out_stride + r] = lanes[lane];
            }
    };
    int64_t v = 0;
    for (; v + kGemmVectors <= p.vectors; v += kGemmVectors) vectors.template operator()<kGemmVectors>(v);
    for (; v < p.vectors; ++v) vectors.template operator()<1>(v);
}

template <DType W>
void gemm_range(const WeightRows& m, int64_t r0, int64_t r1, const PackedTokens& p, Panel panel, int64_t n_tokens,
                float* out, int64_t out_stride) noexcept {
    int64_t r = r0;
    for (; r + kGemmRows <= r1; r += kGemmRows) gemm_rows<W, kGemmRows>(m, r, p, panel, n_tokens, out + r, out_stride);
    switch (r1 - r) {
        case 3: gemm_rows<W, 3>(m, r, p, panel, n_tokens, out + r, out_stride); break;
        case 2: gemm_rows<W, 2>(m, r, p, panel, n_tokens, out + r, out_stride); break;
        case 1: gemm_rows<W, 1>(m, r, p, panel, n_tokens, out + r, out_stride); break;
        default: break;
    }
}

// ---- Signed codes (Q8_0, IQ4_NL): int16 pairs and vpmaddwd ----
//
// With signed weights vpmaddubsw needs the sign trick, one vpsignb per
// product, and a vpmaddwd per quad (a pair reaches 2 x 128 x 127, so no two
// quads add in int16): three instructions on the two ports that multiply
// (vpsignb shares them on the AMD cores measured) per 32 multiply-adds. Here
// both operands are widened to int16 once, the weights when a chunk's panel is
// unpacked and the activations when they are packed, and one vpmaddwd gives 16
// multiply-adds straight into int32: two multiplies per 32. The int32 block
// sums are exact (at most 32 x 128 x 127) and the float step is the same as
// above, so the results are the same bits. Measured (kiln-kernel-bench -t 1
// -r 10 --batch 5632x2048:512 and 2048x5632:512, 2-core AMD EPYC, the
// rounds alternated): the sign-trick quads 104-105 GFLOP/s; these pairs with
// 4 rows x 1 vector 106-116, with 4 x 2 127. Also tried, no faster: the
// weights' pairs broadcast once per block into a panel of vectors (memory
// operands instead of vpbroadcastd), and one 128-bit load of four pairs per
// row spread by vpshufd (97-105).

// Activations as int16 pairs: per token vector and block, 16 pairs p of
// (x[2p], x[2p + 1]) with one token per 32-bit lane, then the tokens' scales.
constexpr int64_t kPairBlockInts = 16 * 8;  // int32 words per (vector, block)

struct PairTokens {
    int64_t nb = 0, vectors = 0;
    const int32_t* pairs = nullptr;  // [vector][block][pair][lane]
    const float* scales = nullptr;   // [vector][block][lane]
};

size_t pair_tokens_bytes(int64_t k, int64_t n_tokens) noexcept {
    const int64_t vectors = (n_tokens + 7) / 8, nb = k / 32;
    return static_cast<size_t>(vectors * nb) * (kPairBlockInts * 4 + 32);
}

PairTokens pack_token_pairs(int64_t k, const std::byte* x, size_t x_stride, int64_t n_tokens, std::byte* scratch) noexcept {
    PairTokens p;
    p.nb = k / 32;
    p.vectors = (n_tokens + 7) / 8;
    const auto blocks = static_cast<size_t>(p.vectors * p.nb);
    auto* pairs = reinterpret_cast<int32_t*>(scratch);
    auto* scales = reinterpret_cast<float*>(scratch + blocks * kPairBlockInts * 4);
    for_each_token_lane(p.vectors, p.nb, [&](size_t vb, int64_t b, int lane, int64_t t) {
        int32_t* dst = pairs + vb * kPairBlockInts;
        const size_t at = vb * 8 + static_cast<size_t>(lane);
        if (t >= n_tokens) {  // padding: zero codes and scales, never stored
            for (int q = 0; q < 16; ++q) dst[q * 8 + lane] = 0;
            scales[at] = 0.0f;
            return;
        }
        const std::byte* blk = x + t * static_cast<int64_t>(x_stride) + b * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
        alignas(32) int32_t words[16];
        const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(codes)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(words + 8), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(codes, 1)));
        for (int q = 0; q < 16; ++q) dst[q * 8 + lane] = words[q];
        scales[at] = half_at(blk);
    });
    p.pairs = pairs;
    p.scales = scales;
    return p;
}

// A chunk's weight rows as int16 pairs, block-major so that a slice of
// blocks of all the chunk's rows is one contiguous run (row-major, the rows'
// slices lie a power of two apart and fight over the same L1 sets): per block
// and row 16 words, then per block and row the scales.
constexpr int64_t kPairChunkRows = 32;
struct PairPanel {
    int32_t* pairs;  // [block][row][16]
    float* scales;   // [block][row]
};
size_t pair_panel_bytes(int64_t k) noexcept { return static_cast<size_t>(kPairChunkRows * (k / 32)) * (16 * 4 + 4); }
PairPanel pair_panel_at(std::byte* p, int64_t k) noexcept {
    auto* pairs = reinterpret_cast<int32_t*>(p);
    return {pairs, reinterpret_cast<float*>(pairs + kPairChunkRows * (k / 32) * 16)};
}

template <DType W>
void unpack_pair_panel(const WeightRows& m, int64_t first, int rows, int64_t nb, PairPanel panel) noexcept {
    alignas(32) std::byte gathered[64];
    for (int r = 0; r < rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* blk = m.template block<W>(first + r, b, gathered);
            const __m256i codes = gemm_codes<W>(blk);
            auto* dst = reinterpret_cast<__m256i*>(panel.pairs + (b * kPairChunkRows + r) * 16);
            _mm256_store_si256(dst, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(codes)));
            _mm256_store_si256(dst + 1, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(codes, 1)));
            panel.scales[b * kPairChunkRows + r] = half_at(blk);
        }
}

// Panel rows [row, row + R) against token vectors [v0, v0 + V) over blocks
// [b0, b1), adding to acc (per vector kPairChunkRows rows of 8 token lanes)
// block by block.
template <int R, int V>
void pair_tile(const PairPanel& panel, int row, const PairTokens& p, int64_t v0, int64_t b0, int64_t b1,
               float* acc_rows) noexcept {
    const int64_t nb = p.nb;
    __m256 acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm256_load_ps(acc_rows + (v * kPairChunkRows + r) * 8);
    for (int64_t b = b0; b < b1; ++b) {
        const int32_t* w = panel.pairs + (b * kPairChunkRows + row) * 16;
        const int32_t* xb = p.pairs + (v0 * nb + b) * kPairBlockInts;
        __m256i dot[R][V];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) dot[r][v] = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
            __m256i xv[V];
            for (int v = 0; v < V; ++v)
                xv[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + v * nb * kPairBlockInts + q * 8));
            for (int r = 0; r < R; ++r) {
                const __m256i wq = _mm256_set1_epi32(w[r * 16 + q]);
                for (int v = 0; v < V; ++v) {
                    dot[r][v] = _mm256_add_epi32(dot[r][v], _mm256_madd_epi16(wq, xv[v]));
                    __asm__("" : "+x"(dot[r][v]));  // as in gemm_rows
                }
            }
        }
        const float* ws = panel.scales + b * kPairChunkRows + row;
        for (int v = 0; v < V; ++v) {
            const __m256 dx = _mm256_load_ps(p.scales + ((v0 + v) * nb + b) * 8);
            for (int r = 0; r < R; ++r)
                acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][v]), _mm256_mul_ps(_mm256_set1_ps(ws[r]), dx), acc[r][v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) _mm256_store_ps(acc_rows + (v * kPairChunkRows + r) * 8, acc[r][v]);
}

// The micro-kernel: 4 rows x 2 token vectors (kiln-kernel-bench --batch
// 5632x2048:512 and 2048x5632:512, 1 thread, AMD EPYC, best of 10: 4 x 1
// 106-111 GFLOP/s, 4 x 2 127, 6 x 2 127-129, 3 x 2 123-126, 4 x 3 115-122,
// 8 x 1 110-121, 2 x 4 85-88).
constexpr int kPairRows = 4;
constexpr int kPairVectors = 2;
// Blocks per slice: a slice of the tile's token vectors (512 bytes a block
// each) and of the chunk's panel (32 x 68 bytes a block) stay in L1 while
// every row tile passes.
constexpr int64_t kPairSliceBlocks = 16;

template <DType W>
bool pair_gemm(DType layout, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
               size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    if (!has_claimable_rows(r0, r1, claims)) return true;
    const int64_t nb = k / 32;
    const size_t tokens_bytes = round_up(pair_tokens_bytes(k, n_tokens), 64);
    const size_t panel_bytes = round_up(pair_panel_bytes(k), 64);
    std::byte* scratch = thread_scratch(tokens_bytes + panel_bytes + kPairVectors * kPairChunkRows * 8 * sizeof(float));
    if (scratch == nullptr) return false;
    const PairTokens packed = pack_token_pairs(k, x, x_stride, n_tokens, scratch);
    const PairPanel panel = pair_panel_at(scratch + tokens_bytes, k);
    auto* acc = reinterpret_cast<float*>(scratch + tokens_bytes + panel_bytes);  // [vector][row][lane]
    const WeightRows m{w, w_stride, quant::is_interleaved(layout)};
    // The chunk's rows against vectors [v0, v0 + V), slice by slice.
    const auto run_vectors = [&]<int V>(int rows, int64_t v0) {
        std::fill(acc, acc + V * kPairChunkRows * 8, 0.0f);
        for (int64_t s0 = 0; s0 < nb; s0 += kPairSliceBlocks) {
            const int64_t s1 = std::min(nb, s0 + kPairSliceBlocks);
            int r = 0;
            for (; r + kPairRows <= rows; r += kPairRows) pair_tile<kPairRows, V>(panel, r, packed, v0, s0, s1, acc + r * 8);
            switch (rows - r) {
                case 3: pair_tile<3, V>(panel, r, packed, v0, s0, s1, acc + r * 8); break;
                case 2: pair_tile<2, V>(panel, r, packed, v0, s0, s1, acc + r * 8); break;
                case 1: pair_tile<1, V>(panel, r, packed, v0, s0, s1, acc + r * 8); break;
                default: break;
            }
        }
    };
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t c0 = a; c0 < b; c0 += kPairChunkRows) {
            const int rows = static_cast<int>(std::min(kPairChunkRows, b - c0));
            unpack_pair_panel<W>(m, c0, rows, nb, panel);
            for (int64_t v0 = 0; v0 < packed.vectors;) {
                const int vs = packed.vectors - v0 >= kPairVectors ? kPairVectors : 1;
                if (vs == kPairVectors) run_vectors.template operator()<kPairVectors>(rows, v0);
                else run_vectors.template operator()<1>(rows, v0);
                for (int v = 0; v < vs; ++v)
                    for (int lane = 0; lane < 8 && (v0 + v) * 8 + lane < n_tokens; ++lane)
                        for (int r = 0; r < rows; ++r)
                            out[((v0 + v) * 8 + lane) * out_stride + c0 + r] = acc[(v * kPairChunkRows + r) * 8 + lane];
                v0 += vs;
            }
        }
    });
    return true;
}

// The GEMM over this thread's claimed rows; false when its scratch cannot be had.
template <DType W>
bool block_gemm(DType layout, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
                size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    // Activations packed once for every chunk this thread claims.
    const size_t tokens_bytes = packed_tokens_bytes(k, n_tokens);
    std::byte* scratch = thread_scratch(tokens_bytes + panel_bytes(k));
    if (scratch == nullptr) return false;
    const PackedTokens packed = pack_tokens<W>(k, x, x_stride, n_tokens, scratch);
    const Panel panel = panel_at(scratch + tokens_bytes, k);
    const WeightRows m{w, w_stride, quant::is_interleaved(layout)};
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        gemm_range<W>(m, a, b, packed, panel, n_tokens, out, out_stride);
    });
    return true;
}

}  // namespace

bool avx2_block_gemm(DType type, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                     const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                     const RowClaims* claims) noexcept {
    switch (type) {
        case DType::Q8_0:
        case DType::Q8_0_R16: return pair_gemm<DType::Q8_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_0:
        case DType::Q4_0_R16: return block_gemm<DType::Q4_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_1: return block_gemm<DType::Q4_1>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q5_0: return block_gemm<DType::Q5_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q5_1: return block_gemm<DType::Q5_1>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::IQ4_NL: return pair_gemm<DType::IQ4_NL>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        default: return false;
    }
}

}  // namespace kiln::kernels::detail

#endif
