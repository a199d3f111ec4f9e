// The "avx2" set's GEMM of the 32-element block types: prompt batches of
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL weights, laid out
// as the K-quant GEMM (matmul_avx2_kquant_gemm.cpp): tokens in the lanes. The
// activations are packed once per call, 8 tokens to a vector: for each
// 32-element block its eight 4-byte quads with one token per 32-bit lane, the
// tokens' block scales, code sums and (Q8_1) s. A weight row's quad is
// broadcast against a vector of token quads, so vpmaddubsw meets 8 tokens at
// once and no instruction goes to the per-pair sign shuffles of the tiles
// (about 7 instructions per 32 multiply-adds there: Q8_0 and Q4_0 pp512 ran at
// 36% and 31% of this set's int8 peak by kiln-bench --compute-roofline,
// against 84% for Q4_K_M).
//
// Unsigned codes (Q4_0, Q4_1: 0..15; Q5_0, Q5_1: 0..31) meet the signed
// activation codes directly. A quad's two int16 pair sums are at most
// 2 x 15 x 128 (4 bits) or 2 x 31 x 128 (5 bits), so 8 or 4 quads add exactly in
// int16 before one vpmaddwd by ones folds them to int32. Q4_0 and Q5_0 then
// subtract 8 or 16 times the token's code sum (their offsets): exactly the
// int32 block dot of the tiles (matmul_avx2.cpp). Signed codes (Q8_0, IQ4_NL's table values)
// take the sign trick per quad, one vpmaddwd per quad (a pair reaches
// 2 x 128 x 127). Per block and token lane: one float multiply-add of the exact
// int32 dot by d_w x d_x, and for Q4_1/Q5_1 one of the minimum by the token's
// s, in block order: each (row, token) result is the same whatever rows,
// tokens, chunk or thread it is computed with. Interleaved Q8_0_R16 and
// Q4_0_R16 rows are gathered back to plain blocks as the panel is unpacked
// (once per row and call), so they give the plain rows' bits.
#include "engine/kernels/matmul_avx2_block_gemm.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/matmul_avx2_blocks.h"

#include <cstring>

#include "engine/quant/interleave.h"

namespace kiln::kernels::detail {
namespace {

using namespace avx2_blocks;

constexpr int kGemmRows = 4;

template <DType W>
constexpr bool kSignedCodes = W == DType::Q8_0 || W == DType::IQ4_NL;
template <DType W>
constexpr int kCodeOffset = W == DType::Q4_0 ? 8 : W == DType::Q5_0 ? 16 : 0;
// Quads whose int16 pair sums may be added before widening (see above).
template <DType W>
constexpr int kQuadsPerWiden = kSignedCodes<W> ? 1 : (W == DType::Q5_0 || W == DType::Q5_1) ? 4 : 8;

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

// The weight panel of kGemmRows rows: their codes (unsigned; or, for the
// signed types, the magnitudes and then the signed codes), then their block
// scales, then their block minimums.
struct Panel {
    uint8_t* codes;
    float* scales;
    float* mins;
};
size_t panel_bytes(int64_t k) noexcept { return static_cast<size_t>(kGemmRows * k) * 2 + static_cast<size_t>(kGemmRows * k / 32) * 8; }
Panel panel_at(std::byte* p, int64_t k) noexcept {
    auto* scales = reinterpret_cast<float*>(p + static_cast<size_t>(kGemmRows * k) * 2);
    return {reinterpret_cast<uint8_t*>(p), scales, scales + kGemmRows * k / 32};
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
    for (int64_t v = 0; v < p.vectors; ++v)
        for (int64_t b = 0; b < p.nb; ++b) {
            const size_t vb = static_cast<size_t>(v * p.nb + b);
            int8_t* dst = quads + vb * 256;
            for (int lane = 0; lane < 8; ++lane) {
                const int64_t t = v * 8 + lane;
                const size_t at = vb * 8 + static_cast<size_t>(lane);
                if (t >= n_tokens) {  // padding: zero codes and scales, never stored
                    for (int q = 0; q < 8; ++q) std::memset(dst + q * 32 + lane * 4, 0, 4);
                    scales[at] = 0.0f;
                    sums[at] = 0;
                    s[at] = 0.0f;
                    continue;
                }
                const std::byte* blk = x + t * static_cast<int64_t>(x_stride) + b * kActBytes<W>;
                const auto* codes = reinterpret_cast<const int8_t*>(blk + kActCodes<W>);
                int32_t sum = 0;
                for (int e = 0; e < 32; ++e) sum += codes[e];
                for (int q = 0; q < 8; ++q) std::memcpy(dst + q * 32 + lane * 4, codes + q * 4, 4);
                scales[at] = half_at(blk);
                sums[at] = sum;
                s[at] = kHasMinimum<W> ? half_at(blk + 2) : 0.0f;
            }
        }
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
    const size_t per_row = static_cast<size_t>(k) * (kSignedCodes<W> ? 2 : 1);
    alignas(32) std::byte gathered[64];
    for (int r = 0; r < R; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* blk = m.template block<W>(first + r, b, gathered);
            uint8_t* dst = panel.codes + r * per_row + static_cast<size_t>(b * 32);
            const __m256i codes = gemm_codes<W>(blk);
            if constexpr (kSignedCodes<W>) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_abs_epi8(codes));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), codes);
            } else {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), codes);
            }
            panel.scales[r * nb + b] = half_at(blk);
            if constexpr (kHasMinimum<W>) panel.mins[r * nb + b] = half_at(blk + 2);
        }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t v = 0; v < p.vectors; ++v) {
        __m256 acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const size_t vb = static_cast<size_t>(v * nb + b);
            const int8_t* xq = p.quads + vb * 256;
            __m256i dot[R];
            for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
            for (int q0 = 0; q0 < 8; q0 += kQuadsPerWiden<W>) {
                __m256i pairs[R];
                for (int r = 0; r < R; ++r) pairs[r] = _mm256_setzero_si256();
                for (int q = q0; q < q0 + kQuadsPerWiden<W>; ++q) {
                    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + q * 32));
                    for (int r = 0; r < R; ++r) {
                        const uint8_t* row = panel.codes + r * per_row + static_cast<size_t>(b * 32 + q * 4);
                        int32_t quad;
                        std::memcpy(&quad, row, 4);
                        __m256i xs = xv;
                        if constexpr (kSignedCodes<W>) {
                            int32_t signed_quad;
                            std::memcpy(&signed_quad, row + k, 4);
                            xs = _mm256_sign_epi8(xv, _mm256_set1_epi32(signed_quad));
                        }
                        pairs[r] = _mm256_add_epi16(pairs[r], _mm256_maddubs_epi16(_mm256_set1_epi32(quad), xs));
                    }
                }
                for (int r = 0; r < R; ++r) dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(pairs[r], ones));
            }
            const __m256 dx = _mm256_loadu_ps(p.scales + vb * 8);
            __m256i offset = _mm256_setzero_si256();
            if constexpr (kCodeOffset<W> != 0)
                offset = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sums + vb * 8)),
                                            _mm256_set1_epi32(kCodeOffset<W>));
            for (int r = 0; r < R; ++r) {
                const __m256i exact = kCodeOffset<W> != 0 ? _mm256_sub_epi32(dot[r], offset) : dot[r];
                const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(panel.scales[r * nb + b]), dx);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), scale, acc[r]);
                if constexpr (kHasMinimum<W>)
                    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(panel.mins[r * nb + b]), _mm256_loadu_ps(p.s + vb * 8), acc[r]);
            }
        }
        for (int r = 0; r < R; ++r) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[r]);
            for (int lane = 0; lane < 8 && v * 8 + lane < n_tokens; ++lane) out[(v * 8 + lane) * out_stride + r] = lanes[lane];
        }
    }
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
        case DType::Q8_0_R16: return block_gemm<DType::Q8_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_0:
        case DType::Q4_0_R16: return block_gemm<DType::Q4_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_1: return block_gemm<DType::Q4_1>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q5_0: return block_gemm<DType::Q5_0>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q5_1: return block_gemm<DType::Q5_1>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::IQ4_NL: return block_gemm<DType::IQ4_NL>(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        default: return false;
    }
}

}  // namespace kiln::kernels::detail

#endif
