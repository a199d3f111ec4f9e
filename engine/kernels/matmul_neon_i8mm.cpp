// The "neon-i8mm" set's GEMM of Q8_0 and Q4_0 weights against Q8_0
// activations, for products of 2 tokens or more (prompt batches), with SMMLA
// (vmmlaq_s32): one instruction multiplies a 2 x 8 int8 matrix by an 8 x 2 one
// into a 2 x 2 int32 tile, so two weight rows meet two tokens at once, 32
// multiply-adds where sdot does 16.
//
// The operands are laid out for it once: the tokens in pairs, once per call
// (each thread packs all of them, as the AVX2 GEMM does: the packing is O(n k)
// against the product's O(rows n k)); the weight rows in pairs, once per panel
// of 4 rows, which then meets every token. A pair's block is four 16-byte
// vectors, vector c holding elements 8c..8c+7 of the first row (or token) and
// then the same of the second: the two operand rows SMMLA reads. Four SMMLAs
// give the block's exact int32 dots of the 2 x 2 (row, token) tile (each at
// most 32 x 128 x 128 in magnitude, so exact in int32 and in float).
//
// Per block, each (row, token) accumulator lane then takes one float
// multiply-add, acc = fma(float(dot), d_w x d_x, acc), in block order: the
// per-block arithmetic of the dot-product kernels (matmul_neon.cpp), so the
// results match theirs and the scalar set's to float rounding. An odd last
// row or token is paired with itself (its result is written once), so each
// (row, token) result is the same bits whatever rows, tokens, chunk or thread
// it is computed with. (The dot-product tiles spread a block's dot over four
// lanes and add them at the end: a token computed alone, by the decode tiles,
// may differ from the same token in a batch by that rounding.)
#include "engine/kernels/matmul_neon_i8mm.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_MATMUL_INT8)

#include "engine/kernels/matmul_neon_blocks.h"

namespace kiln::kernels::detail {
namespace {

using neon::Codes;
using neon::half_at;
using neon::load_activation;
using neon::load_codes;

constexpr int64_t kPairBlock = 64;  // bytes of one block of a pair: 4 vectors of 2 x 8 codes
constexpr int kPanelPairs = 2;      // weight row pairs per panel (4 rows)
constexpr int kTilePairs = 2;       // token pairs per register tile (4 tokens)
constexpr int64_t kActBytes = sizeof(quant::BlockQ8_0);

// The 64-bit halves of two 16-byte code vectors, interleaved: [a0..7 b0..7], [a8..15 b8..15].
inline void store_pair(Codes a, Codes b, int8_t* dst) noexcept {
    const auto s64 = [](int8x16_t v) { return vreinterpretq_s64_s8(v); };
    vst1q_s8(dst, vreinterpretq_s8_s64(vzip1q_s64(s64(a.lo), s64(b.lo))));
    vst1q_s8(dst + 16, vreinterpretq_s8_s64(vzip2q_s64(s64(a.lo), s64(b.lo))));
    vst1q_s8(dst + 32, vreinterpretq_s8_s64(vzip1q_s64(s64(a.hi), s64(b.hi))));
    vst1q_s8(dst + 48, vreinterpretq_s8_s64(vzip2q_s64(s64(a.hi), s64(b.hi))));
}

// Operands in pairs: codes [pair][block][kPairBlock bytes] and scales
// [pair][block][S floats] (tokens: {d_x0, d_x1}; weight rows: {d_w0, d_w0,
// d_w1, d_w1}, the lanes of the 2 x 2 tile they scale).
template <int S>
struct Pairs {
    int8_t* codes;
    float* scales;
    int64_t nb;
    const int8_t* codes_at(int64_t pair, int64_t b) const noexcept { return codes + (pair * nb + b) * kPairBlock; }
    const float* scales_at(int64_t pair, int64_t b) const noexcept { return scales + (pair * nb + b) * S; }
};

// The scratch of one call: the token pairs, then one panel of weight row pairs.
size_t scratch_bytes(int64_t nb, int64_t token_pairs) noexcept {
    return static_cast<size_t>((token_pairs + kPanelPairs) * nb) * kPairBlock +
           static_cast<size_t>(kPanelPairs * nb) * 4 * sizeof(float) +
           static_cast<size_t>(token_pairs * nb) * 2 * sizeof(float);
}

// Tokens 2q and 2q + 1 (the last token twice when n_tokens is odd) as pair q.
Pairs<2> pack_tokens(int64_t nb, const std::byte* x, size_t x_stride, int64_t n_tokens, int8_t* codes,
                     float* scales) noexcept {
    const Pairs<2> p{codes, scales, nb};
    for (int64_t q = 0; q < (n_tokens + 1) / 2; ++q) {
        const std::byte* xa = x + 2 * q * static_cast<int64_t>(x_stride);
        const std::byte* xb = x + std::min(2 * q + 1, n_tokens - 1) * static_cast<int64_t>(x_stride);
        for (int64_t b = 0; b < nb; ++b) {
            store_pair(load_activation(xa + b * kActBytes), load_activation(xb + b * kActBytes),
                       codes + (q * nb + b) * kPairBlock);
            scales[(q * nb + b) * 2] = half_at(xa + b * kActBytes);
            scales[(q * nb + b) * 2 + 1] = half_at(xb + b * kActBytes);
        }
    }
    return p;
}

// Rows [r, min(r + 2 * kPanelPairs, r_end)) as pairs, the last row twice when
// they are odd in number.
template <DType W>
void pack_panel(int64_t nb, const std::byte* w, size_t w_stride, int64_t r, int64_t r_end, const Pairs<4>& panel) noexcept {
    constexpr int64_t BB = neon::kBlockBytes<W>;
    for (int p = 0; p < kPanelPairs && r + 2 * p < r_end; ++p) {
        const std::byte* wa = w + (r + 2 * p) * static_cast<int64_t>(w_stride);
        const std::byte* wb = w + std::min(r + 2 * p + 1, r_end - 1) * static_cast<int64_t>(w_stride);
        for (int64_t b = 0; b < nb; ++b) {
            store_pair(load_codes<W>(wa + b * BB), load_codes<W>(wb + b * BB), panel.codes + (p * nb + b) * kPairBlock);
            const float da = half_at(wa + b * BB), db = half_at(wb + b * BB);
            vst1q_f32(panel.scales + (p * nb + b) * 4, vcombine_f32(vdup_n_f32(da), vdup_n_f32(db)));
        }
    }
}

// RP row pairs of the panel against TP token pairs from token pair q0:
// acc[p][t] holds the 2 x 2 tile (row 2p + i, token pair q0 + t's token j) in lane 2i + j.
template <int RP, int TP>
inline void tile(const Pairs<4>& panel, const Pairs<2>& tokens, int64_t q0, float32x4_t (&acc)[RP][TP]) noexcept {
    for (int p = 0; p < RP; ++p)
        for (int t = 0; t < TP; ++t) acc[p][t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < panel.nb; ++b) {
        int32x4_t dot[RP][TP];
        for (int p = 0; p < RP; ++p)
            for (int t = 0; t < TP; ++t) dot[p][t] = vdupq_n_s32(0);
        for (int c = 0; c < 4; ++c) {
            int8x16_t wv[RP], xv[TP];
            for (int p = 0; p < RP; ++p) wv[p] = vld1q_s8(panel.codes_at(p, b) + 16 * c);
            for (int t = 0; t < TP; ++t) xv[t] = vld1q_s8(tokens.codes_at(q0 + t, b) + 16 * c);
            for (int p = 0; p < RP; ++p)
                for (int t = 0; t < TP; ++t) dot[p][t] = vmmlaq_s32(dot[p][t], wv[p], xv[t]);
        }
        for (int t = 0; t < TP; ++t) {
            const float32x2_t d = vld1_f32(tokens.scales_at(q0 + t, b));
            const float32x4_t dx = vcombine_f32(d, d);  // {d_x0, d_x1, d_x0, d_x1}
            for (int p = 0; p < RP; ++p)
                acc[p][t] = vfmaq_f32(acc[p][t], vcvtq_f32_s32(dot[p][t]), vmulq_f32(vld1q_f32(panel.scales_at(p, b)), dx));
        }
    }
}

// The panel's rows [r, r_end) against every token: out[t * out_stride + row].
template <int RP>
void panel_times_tokens(const Pairs<4>& panel, const Pairs<2>& tokens, int64_t r, int64_t r_end, int64_t n_tokens,
                        float* out, int64_t out_stride) noexcept {
    const int64_t token_pairs = (n_tokens + 1) / 2;
    const auto store = [&]<int TP>(int64_t q0, float32x4_t (&acc)[RP][TP]) {
        for (int p = 0; p < RP; ++p)
            for (int t = 0; t < TP; ++t) {
                float lanes[4];
                vst1q_f32(lanes, acc[p][t]);
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) {
                        const int64_t row = r + 2 * p + i, token = 2 * (q0 + t) + j;
                        if (row < r_end && token < n_tokens) out[token * out_stride + row] = lanes[2 * i + j];
                    }
            }
    };
    int64_t q0 = 0;
    for (; q0 + kTilePairs <= token_pairs; q0 += kTilePairs) {
        float32x4_t acc[RP][kTilePairs];
        tile<RP, kTilePairs>(panel, tokens, q0, acc);
        store(q0, acc);
    }
    if (q0 < token_pairs) {
        static_assert(kTilePairs == 2, "one token pair at most is left over");
        float32x4_t acc[RP][1];
        tile<RP, 1>(panel, tokens, q0, acc);
        store(q0, acc);
    }
}

template <DType W>
bool i8mm_gemm(int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1, const std::byte* x,
               size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride, const RowClaims* claims) noexcept {
    const int64_t nb = k / 32, token_pairs = (n_tokens + 1) / 2;
    // Scratch first: once chunks are claimed, nothing may fail.
    std::byte* scratch = thread_scratch(scratch_bytes(nb, token_pairs));
    if (scratch == nullptr) return false;
    auto* token_codes = reinterpret_cast<int8_t*>(scratch);
    auto* panel_codes = token_codes + token_pairs * nb * kPairBlock;
    auto* panel_scales = reinterpret_cast<float*>(panel_codes + kPanelPairs * nb * kPairBlock);
    float* token_scales = panel_scales + kPanelPairs * nb * 4;
    const Pairs<2> tokens = pack_tokens(nb, x, x_stride, n_tokens, token_codes, token_scales);
    const Pairs<4> panel{panel_codes, panel_scales, nb};
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; r += 2 * kPanelPairs) {
            pack_panel<W>(nb, w, w_stride, r, b, panel);
            if (b - r > 2)
                panel_times_tokens<2>(panel, tokens, r, b, n_tokens, out, out_stride);
            else
                panel_times_tokens<1>(panel, tokens, r, b, n_tokens, out, out_stride);
        }
    });
    return true;
}

}  // namespace

bool neon_i8mm_matmul(DType type, int64_t k, const std::byte* w, size_t w_stride, int64_t r0, int64_t r1,
                      const std::byte* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                      const RowClaims* claims) noexcept {
    assert(n_tokens >= kI8mmMinTokens);
    switch (type) {
        case DType::Q8_0: return i8mm_gemm<DType::Q8_0>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        case DType::Q4_0: return i8mm_gemm<DType::Q4_0>(k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
        default: return false;
    }
}

}  // namespace kiln::kernels::detail

#endif
