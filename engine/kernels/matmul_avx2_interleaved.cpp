// Decode kernels of the "avx2" set for the interleaved layouts
// (quant/interleave.h): Q4_K_R16, Q5_K_R16, Q6_K_R16 and Q6_K_R16B weights against
// Q8_K-prepared tokens, Q8_0_R16 and Q4_0_R16 against Q8_0-prepared ones
// (legacy_rows, below).
//
// Rows sit in the 32-bit lanes, 8 rows to a vector (a group's 16 rows are two
// vectors). A 32-byte load holds the same 4 code bytes of 8 rows; against the
// token's matching 4 codes broadcast to every lane, vpmaddubsw leaves each
// row's lane two int16 sums of 2 products. Those of the quads of one sub-block
// are added in int16 while the sum provably fits (each pair is at most
// 2 x max code x 128: all 8 quads of a sub-block for Q4_K, 4 for Q5_K, 2 for
// Q6_K), and one vpmaddwd by the row's scale, repeated in both int16 halves of
// the lane, folds pair and scale into int32. So per 8 rows and quad this is one
// load, the unpacking, one vpmaddubsw and one vpaddw, against a vpmaddubsw, a
// vpmaddwd, a vpaddd and a scale shuffle per row and 32 elements for the plain
// tiles (matmul_avx2_kquants.cpp); scales, mins and the float work are decoded
// once for 8 rows.
//
// Software prefetch, 2 KiB ahead in the group's stream, each line once, spread
// through the block's work: a part of the block's lines at each step (each
// sub-block or quad). A group's rows are one contiguous stream, but on one
// core the hardware prefetchers alone did not keep enough lines in flight
// while the kernel computes: streaming 1 GiB of copies (kiln-kernel-bench, AMD
// EPYC, 1 thread, as a share of the read bandwidth measured just before, two
// runs) Q4_K 73-78% -> 80-90%, Q4_0 76-93% -> 90-93%, Q5_K 46-62% -> 64-73%,
// Q6_K 43-46% -> 59-71%, Q8_0 65-69% -> 93-103% with all of a block's lines
// asked for when it starts; spread, Q4_K 68-77% -> 94-97%, Q5_K 59-73% ->
// 85-91%, Q6_K 56-58% -> 70-75% (Q8_0 and Q4_0, whose blocks are a few lines,
// unchanged). 1 KiB and 4 KiB ahead were close, mostly a little lower.
//
// All integer sums are exact, and per super-block the float work is that of
// the avx512-vnni interleaved kernels: acc += isum * (d * dx), then, with a
// minimum, acc -= msum * (dmin * dx). Each row's arithmetic is the same in
// every tile shape and thread split. Prompts (6 tokens or more; 8 for Q8_0 and
// Q4_0) run the GEMMs, which take interleaved blocks as they take plain ones.
#include "engine/kernels/matmul_avx2_kquants.h"
#include "engine/kernels/matmul_avx2_block_gemm.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "engine/kernels/matmul_avx2_kquant_unpack.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/quant/interleave.h"

namespace kiln::kernels::detail {
namespace {

constexpr int64_t kGroupRows = quant::kInterleaveRows;

// How far ahead of the block it multiplies a kernel prefetches the group's
// stream (see the file comment).
constexpr int64_t kPrefetchAhead = 2048;

// Prefetches the cache lines that start in [block + kPrefetchAhead,
// block + kPrefetchAhead + bytes): called for consecutive blocks of one
// stream, it asks for every line once.
// Part `part` of `parts` of that: the lines that start in the part's share of
// [block + kPrefetchAhead, block + kPrefetchAhead + bytes). A kernel asks for
// one part at each of `parts` steps through the block, so its prefetches are
// spread through its work instead of issued in one burst when it starts.
inline void prefetch_ahead(const std::byte* block, int64_t bytes, int part, int parts) noexcept {
    const auto base = reinterpret_cast<uintptr_t>(block) + kPrefetchAhead;
    const uintptr_t from = base + static_cast<uintptr_t>(bytes * part / parts);
    const uintptr_t end = base + static_cast<uintptr_t>(bytes * (part + 1) / parts);
    for (uintptr_t line = (from + 63) & ~uintptr_t{63}; line < end; line += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
}

constexpr int kLaneRows = 8;                                 // rows per vector
using namespace avx2_kquant;  // load256, bcast32, the Q8_K block's offsets

// Per 32-bit lane, its byte `b` zero-extended into both int16 halves: (s, s).
inline __m256i lane_byte_pair(__m256i words, int b) noexcept {
    const char z = static_cast<char>(0x80);
    const auto at = [&](int lane) { return static_cast<char>(4 * lane + b); };
    return _mm256_shuffle_epi8(words, _mm256_setr_epi8(at(0), z, at(0), z, at(1), z, at(1), z, at(2), z, at(2), z, at(3),
                                                       z, at(3), z, at(0), z, at(0), z, at(1), z, at(1), z, at(2), z,
                                                       at(2), z, at(3), z, at(3), z));
}
// Per 32-bit lane, its bytes b and b + 1 zero-extended into the int16 halves.
inline __m256i lane_bytes_pair(__m256i words, int b) noexcept {
    const char z = static_cast<char>(0x80);
    const auto at = [&](int lane, int o) { return static_cast<char>(4 * lane + b + o); };
    return _mm256_shuffle_epi8(words, _mm256_setr_epi8(at(0, 0), z, at(0, 1), z, at(1, 0), z, at(1, 1), z, at(2, 0), z,
                                                       at(2, 1), z, at(3, 0), z, at(3, 1), z, at(0, 0), z, at(0, 1), z,
                                                       at(1, 0), z, at(1, 1), z, at(2, 0), z, at(2, 1), z, at(3, 0), z,
                                                       at(3, 1), z));
}
// The vpshufb controls that put, per 32-bit lane, its signed byte b into the
// high byte of both int16 halves (b = 0..3), or bytes b and b + 1 (b = 0, 2)
// into the high bytes of the low and high half: vpsraw by 8 then sign-extends.
struct SignedPicks {
    __m256i same[4], pair[2];
};
inline SignedPicks signed_picks() noexcept {
    SignedPicks p;
    const char z = static_cast<char>(0x80);
    for (int b = 0; b < 4; ++b) {
        const auto at = [&](int lane, int o) { return static_cast<char>(4 * lane + b + o); };
        p.same[b] = _mm256_setr_epi8(z, at(0, 0), z, at(0, 0), z, at(1, 0), z, at(1, 0), z, at(2, 0), z, at(2, 0), z,
                                     at(3, 0), z, at(3, 0), z, at(0, 0), z, at(0, 0), z, at(1, 0), z, at(1, 0), z,
                                     at(2, 0), z, at(2, 0), z, at(3, 0), z, at(3, 0));
        if (b % 2 == 0)
            p.pair[b / 2] = _mm256_setr_epi8(z, at(0, 0), z, at(0, 1), z, at(1, 0), z, at(1, 1), z, at(2, 0), z, at(2, 1),
                                             z, at(3, 0), z, at(3, 1), z, at(0, 0), z, at(0, 1), z, at(1, 0), z, at(1, 1),
                                             z, at(2, 0), z, at(2, 1), z, at(3, 0), z, at(3, 1));
    }
    return p;
}
inline __m256i signed_pick(__m256i words, __m256i control) noexcept {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(words, control), 8);
}

// Bit `bit` of each byte moved to bit 4 (the fifth bit of a Q5_K code).
template <int bit>
inline __m256i fifth_bit(__m256i v) noexcept {
    const __m256i at4 = bit < 4 ? _mm256_slli_epi16(v, 4 - bit) : bit > 4 ? _mm256_srli_epi16(v, bit - 4) : v;
    return _mm256_and_si256(at4, _mm256_set1_epi8(0x10));
}

// Adds int16 pair sums whose total provably fits. Saturating, though nothing
// saturates: the compiler may regroup a chain of plain adds into a tree that
// holds every product at once, which spills.
inline __m256i add_pairs(__m256i a, __m256i b) noexcept { return _mm256_adds_epi16(a, b); }


// Q4_K_R16 or Q5_K_R16 (the same with a fifth bit per code from the qh quads:
// element 64g + l has bit 2g of qh byte l, element 64g + 32 + l bit 2g + 1).
// Rows 8 h0 .. 8 (h0 + V) - 1 of the group, NT tokens: out[t * out_stride + r].
template <DType T, int NT, int V>
void q45_k_rows(int64_t nb, const std::byte* group, int h0, const std::byte* x, size_t x_stride, float* out,
                int64_t out_stride) noexcept {
    constexpr bool kFive = T == DType::Q5_K_R16;
    constexpr int64_t kBlockBytes = kFive ? 16 * 176 : 16 * 144;
    constexpr int64_t kCodes = kFive ? 768 : 256, kHigh = 256;
    // Quads whose pairs are summed in int16: 8 x 2 x 15 x 128 and 4 x 2 x 31 x 128 fit.
    constexpr int kRun = kFive ? 4 : 8;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[V][NT];
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) acc[v][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kBlockBytes;
        __m256i isum[V][NT];
        for (int v = 0; v < V; ++v)
            for (int t = 0; t < NT; ++t) isum[v][t] = _mm256_setzero_si256();
        const auto sub_blocks = [&](auto g_constant) {  // elements 64g .. 64g + 63: sub-blocks 2g (low nibbles), 2g + 1
            constexpr int g = decltype(g_constant)::value;
            // Scales of sub-blocks 0-3 are the low 6 bits of word a's bytes; of
            // 4-7, the low nibbles of word c's with a's top 2 bits above them.
            __m256i s0[V], s1[V];
            for (int v = 0; v < V; ++v) {
                const int h = h0 + v;
                const __m256i a = load256(gb + 64 + 32 * h);
                __m256i words;
                if constexpr (g < 2) {
                    words = _mm256_and_si256(a, _mm256_set1_epi8(0x3F));
                } else {
                    const __m256i c = load256(gb + 192 + 32 * h);
                    words = _mm256_or_si256(_mm256_and_si256(c, low4),
                                            _mm256_and_si256(_mm256_srli_epi32(a, 2), _mm256_set1_epi8(0x30)));
                }
                s0[v] = lane_byte_pair(words, (2 * g) % 4);
                s1[v] = lane_byte_pair(words, (2 * g + 1) % 4);
            }
#pragma GCC unroll 2
            for (int run = 0; run < 8 / kRun; ++run) {
                __m256i plo[V][NT], phi[V][NT];
#pragma GCC unroll 8
                for (int j = run * kRun; j < run * kRun + kRun; ++j) {
                    if (h0 == 0) prefetch_ahead(gb, kBlockBytes, 8 * g + j, 32);
                    __m256i lo[V], hi[V];
                    for (int v = 0; v < V; ++v) {
                        const __m256i q = load256(gb + kCodes + (8 * g + j) * 64 + 32 * (h0 + v));
                        lo[v] = _mm256_and_si256(q, low4);
                        hi[v] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                        if constexpr (kFive) {
                            const __m256i hb = load256(gb + kHigh + j * 64 + 32 * (h0 + v));
                            lo[v] = _mm256_or_si256(lo[v], fifth_bit<2 * g>(hb));
                            hi[v] = _mm256_or_si256(hi[v], fifth_bit<2 * g + 1>(hb));
                        }
                    }
                    for (int t = 0; t < NT; ++t) {
                        const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes + 64 * g + 4 * j;
                        const __m256i xl = bcast32(xq), xh = bcast32(xq + 32);
                        for (int v = 0; v < V; ++v) {
                            const __m256i pl = _mm256_maddubs_epi16(lo[v], xl), ph = _mm256_maddubs_epi16(hi[v], xh);
                            plo[v][t] = j == run * kRun ? pl : add_pairs(plo[v][t], pl);
                            phi[v][t] = j == run * kRun ? ph : add_pairs(phi[v][t], ph);
                        }
                    }
                }
                for (int v = 0; v < V; ++v)
                    for (int t = 0; t < NT; ++t)
                        isum[v][t] = _mm256_add_epi32(
                            isum[v][t], _mm256_add_epi32(_mm256_madd_epi16(plo[v][t], s0[v]), _mm256_madd_epi16(phi[v][t], s1[v])));
            }
        };
        sub_blocks(std::integral_constant<int, 0>{});
        sub_blocks(std::integral_constant<int, 1>{});
        sub_blocks(std::integral_constant<int, 2>{});
        sub_blocks(std::integral_constant<int, 3>{});
        for (int t = 0; t < NT; ++t) {
            const std::byte* xb = x + t * static_cast<int64_t>(x_stride) + i * kXBytes;
            // The token's sums of 32 codes, (B0, B1) .. (B6, B7) as int16 pairs
            // (each at most 32 x 128, so int16 holds it).
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + kXBsums)),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + kXBsums + 16)));
            const __m256i b01 = _mm256_broadcastd_epi32(bs), b23 = _mm256_broadcastd_epi32(_mm_srli_si128(bs, 4));
            const __m256i b45 = _mm256_broadcastd_epi32(_mm_srli_si128(bs, 8)),
                          b67 = _mm256_broadcastd_epi32(_mm_srli_si128(bs, 12));
            float dx;
            std::memcpy(&dx, xb, 4);
            const __m256 vdx = _mm256_set1_ps(dx);
            for (int v = 0; v < V; ++v) {
                const int h = h0 + v;
                // Mins of sub-blocks 0-3: the low 6 bits of word b's bytes; of
                // 4-7, the high nibbles of word c's with b's top 2 bits above them.
                const __m256i b = load256(gb + 128 + 32 * h), c = load256(gb + 192 + 32 * h);
                const __m256i m_lo = _mm256_and_si256(b, _mm256_set1_epi8(0x3F));
                const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), low4),
                                                     _mm256_and_si256(_mm256_srli_epi32(b, 2), _mm256_set1_epi8(0x30)));
                const __m256i msum = _mm256_add_epi32(
                    _mm256_add_epi32(_mm256_madd_epi16(lane_bytes_pair(m_lo, 0), b01), _mm256_madd_epi16(lane_bytes_pair(m_lo, 2), b23)),
                    _mm256_add_epi32(_mm256_madd_epi16(lane_bytes_pair(m_hi, 0), b45), _mm256_madd_epi16(lane_bytes_pair(m_hi, 2), b67)));
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * h)));
                const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 16 * h)));
                acc[v][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[v][t]), _mm256_mul_ps(d, vdx), acc[v][t]);
                acc[v][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vdx), acc[v][t]);
            }
        }
    }
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * out_stride + kLaneRows * v, acc[v][t]);
}

constexpr int64_t kQ6GroupBlockBytes = 16 * 210;
constexpr int64_t kQ6Scales = 32, kQ6Low = 288, kQ6High = 2336;

// The -32 offset of a Q6_K super-block for rows 8h .. 8h + 7 (Q6_K_R16 and
// Q6_K_R16B keep d and the scales alike): minus 32 x the sum over sub-blocks of
// scale x the token's sum of its 16 codes, the sum a row's products start from.
inline __m256i q6_k_offset_term(const std::byte* gb, int h, const std::byte* xb, const SignedPicks& picks) noexcept {
    __m256i off = _mm256_setzero_si256();
    for (int w = 0; w < 4; ++w) {
        const __m256i words = load256(gb + kQ6Scales + 64 * w + 32 * h);
        off = _mm256_add_epi32(off, _mm256_madd_epi16(signed_pick(words, picks.pair[0]), bcast32(xb + kXBsums + 8 * w)));
        off = _mm256_add_epi32(off, _mm256_madd_epi16(signed_pick(words, picks.pair[1]), bcast32(xb + kXBsums + 8 * w + 4)));
    }
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
}

// A super-block's float step: acc += isum * (d * dx), x at the tokens' block.
template <int NT, int V>
inline void q6_k_scale_sums(const std::byte* gb, int h0, const std::byte* x, size_t x_stride,
                            const __m256i (&isum)[V][NT], __m256 (&acc)[V][NT]) noexcept {
    for (int t = 0; t < NT; ++t) {
        float dx;
        std::memcpy(&dx, x + t * static_cast<int64_t>(x_stride), 4);
        const __m256 vdx = _mm256_set1_ps(dx);
        for (int v = 0; v < V; ++v) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * (h0 + v))));
            acc[v][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[v][t]), _mm256_mul_ps(d, vdx), acc[v][t]);
        }
    }
}

// Q6_K_R16: codes in [0, 63] are 4 low bits from a ql quad and 2 high bits from
// a qh quad; ql quads 16n + j and 16n + 8 + j and qh quad 8n + j hold elements
// 128n + 4j + {0, 32, 64, 96} (the layout of ggml's Q6_K), so code vector e of
// quad j lies in sub-block 8n + 2e + j / 4. The -32 offset is taken out once per
// super-block: 32 x the sum over sub-blocks of scale x the token's sum of its
// 16 codes.
template <int NT, int V>
void q6_k_rows(int64_t nb, const std::byte* group, int h0, const std::byte* x, size_t x_stride, float* out,
               int64_t out_stride) noexcept {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    const SignedPicks picks = signed_picks();
    __m256 acc[V][NT];
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) acc[v][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kQ6GroupBlockBytes;
        __m256i isum[V][NT];  // the offset term first
        for (int t = 0; t < NT; ++t)
            for (int v = 0; v < V; ++v)
                isum[v][t] = q6_k_offset_term(gb, h0 + v, x + t * static_cast<int64_t>(x_stride) + i * kXBytes, picks);
        // Code vector e of the quads of elements 128n .. 128n + 127 (n, e constants).
        const auto code_vectors = [&](auto n_constant, auto e_constant) {
            constexpr int n = decltype(n_constant)::value, e = decltype(e_constant)::value;
#pragma GCC unroll 2
            for (int hj = 0; hj < 2; ++hj) {  // quads j = 4 hj .. 4 hj + 3: sub-block 8n + 2e + hj
                const int sb = 8 * n + 2 * e + hj;
                if (h0 == 0) prefetch_ahead(gb, kQ6GroupBlockBytes, 2 * (4 * n + e) + hj, 16);
                __m256i sc[V];
                for (int v = 0; v < V; ++v)
                    sc[v] = signed_pick(load256(gb + kQ6Scales + 64 * (sb / 4) + 32 * (h0 + v)), picks.same[sb % 4]);
#pragma GCC unroll 2
                for (int pair = 0; pair < 2; ++pair) {  // two quads' pairs summed in int16 (2 x 2 x 63 x 128 fits)
                    __m256i p[V][NT];
#pragma GCC unroll 2
                    for (int jj = 0; jj < 2; ++jj) {
                        const int j = 4 * hj + 2 * pair + jj;
                        __m256i q[V];
                        for (int v = 0; v < V; ++v) {
                            const int64_t lane = 32 * (h0 + v);
                            const __m256i l = load256(gb + kQ6Low + (16 * n + 8 * (e % 2) + j) * 64 + lane);
                            const __m256i hb = load256(gb + kQ6High + (8 * n + j) * 64 + lane);
                            const __m256i lo = e < 2 ? _mm256_and_si256(l, low4)
                                                     : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
                            const __m256i top = e == 0   ? _mm256_slli_epi16(hb, 4)
                                                : e == 1 ? _mm256_slli_epi16(hb, 2)
                                                : e == 2 ? hb
                                                         : _mm256_srli_epi16(hb, 2);
                            q[v] = _mm256_or_si256(lo, _mm256_and_si256(top, bits45));
                        }
                        for (int t = 0; t < NT; ++t) {
                            const __m256i xq = bcast32(x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes +
                                                       128 * n + 32 * e + 4 * j);
                            for (int v = 0; v < V; ++v) {
                                const __m256i prod = _mm256_maddubs_epi16(q[v], xq);
                                p[v][t] = jj == 0 ? prod : add_pairs(p[v][t], prod);
                            }
                        }
                    }
                    for (int v = 0; v < V; ++v)
                        for (int t = 0; t < NT; ++t)
                            isum[v][t] = _mm256_add_epi32(isum[v][t], _mm256_madd_epi16(p[v][t], sc[v]));
                }
            }
        };
        [&]<int... ne>(std::integer_sequence<int, ne...>) {
            (code_vectors(std::integral_constant<int, ne / 4>{}, std::integral_constant<int, ne % 4>{}), ...);
        }(std::make_integer_sequence<int, 8>{});
        q6_k_scale_sums<NT, V>(gb, h0, x + i * kXBytes, x_stride, isum, acc);
    }
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * out_stride + kLaneRows * v, acc[v][t]);
}

// Q6_K_R16B: per sub-block s, three quads of 8 rows hold codes 16s .. 16s + 11
// in their bytes' low 6 bits (one AND each) and the fourth quad's codes, 16s +
// 12 .. 16s + 15, two bits in the top of each (shifted down and ORed: 8
// instructions for the vector), so a sub-block of 8 rows is 3 loads and 11
// instructions of unpacking against Q6_K_R16's 8 loads and 17. On the AMD
// EPYC (kiln-kernel-bench -t 1 --types q6_K --shapes 5632x2048,2048x5632,
// 512x1024, two runs against the Q6_K_R16 kernel with its prefetches in one
// burst) hot 20-22 -> 30-36 GB/s, streaming 60-69% -> 92-110% of the read
// bandwidth. The pairs of two quads add in int16 (2 x 2 x 63 x 127 fits),
// each pair sum scaled by vpmaddwd; the -32 offset as in q6_k_rows.
template <int NT, int V>
void q6_k_r16b_rows(int64_t nb, const std::byte* group, int h0, const std::byte* x, size_t x_stride, float* out,
                    int64_t out_stride) noexcept {
    constexpr int64_t kCodes = 288;
    const __m256i low6 = _mm256_set1_epi8(0x3F);
    const SignedPicks picks = signed_picks();
    __m256 acc[V][NT];
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) acc[v][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kQ6GroupBlockBytes;
        __m256i isum[V][NT];
        for (int t = 0; t < NT; ++t)
            for (int v = 0; v < V; ++v)
                isum[v][t] = q6_k_offset_term(gb, h0 + v, x + t * static_cast<int64_t>(x_stride) + i * kXBytes, picks);
#pragma GCC unroll 16
        for (int s = 0; s < 16; ++s) {
            if (h0 == 0) prefetch_ahead(gb, kQ6GroupBlockBytes, s, 16);
            __m256i q[V][4], sc[V];
            for (int v = 0; v < V; ++v) {
                const int64_t lane = 32 * (h0 + v);
                sc[v] = signed_pick(load256(gb + kQ6Scales + 64 * (s / 4) + lane), picks.same[s % 4]);
                const std::byte* p = gb + kCodes + 3 * s * 64 + lane;
                const __m256i a = load256(p), b = load256(p + 64), c = load256(p + 128);
                q[v][0] = _mm256_and_si256(a, low6);
                q[v][1] = _mm256_and_si256(b, low6);
                q[v][2] = _mm256_and_si256(c, low6);
                // The tops, ANDed first so that the 16-bit shifts move no bits across bytes.
                q[v][3] = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(low6, a), 6),
                                                          _mm256_srli_epi16(_mm256_andnot_si256(low6, b), 4)),
                                          _mm256_srli_epi16(_mm256_andnot_si256(low6, c), 2));
            }
            for (int t = 0; t < NT; ++t) {
                const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * kXBytes + kXCodes + 16 * s;
                const __m256i x0 = bcast32(xq), x1 = bcast32(xq + 4), x2 = bcast32(xq + 8), x3 = bcast32(xq + 12);
                for (int v = 0; v < V; ++v) {
                    const __m256i p01 = add_pairs(_mm256_maddubs_epi16(q[v][0], x0), _mm256_maddubs_epi16(q[v][1], x1));
                    const __m256i p23 = add_pairs(_mm256_maddubs_epi16(q[v][2], x2), _mm256_maddubs_epi16(q[v][3], x3));
                    isum[v][t] = _mm256_add_epi32(
                        isum[v][t], _mm256_add_epi32(_mm256_madd_epi16(p01, sc[v]), _mm256_madd_epi16(p23, sc[v])));
                }
            }
        }
        q6_k_scale_sums<NT, V>(gb, h0, x + i * kXBytes, x_stride, isum, acc);
    }
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * out_stride + kLaneRows * v, acc[v][t]);
}

// Q8_0_R16 / Q4_0_R16 against Q8_0 tokens (34-byte blocks: fp16 d, 32 codes
// in [-127, 127]). Q4_0 codes are used as stored (q = w + 8, unsigned): the 8
// quads' pairs (at most 2 x 15 x 128 each) add in int16, one vpmaddwd by ones
// widens them, and 8 x the sum of the token's codes is taken off. Q8_0 codes
// are signed: vpsignb moves each code's sign onto the token's code (pairs at
// most 2 x 128 x 127, widened per quad). Per block the float work is that of
// the avx512-vnni kernels: acc += isum * (d * dx).
template <DType T, int NT, int V>
void legacy_rows(int64_t nb, const std::byte* group, int h0, const std::byte* x, size_t x_stride, float* out,
                 int64_t out_stride) noexcept {
    constexpr bool kEight = T == DType::Q8_0_R16;
    constexpr int64_t kBlockBytes = kEight ? 16 * 34 : 16 * 18;
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[V][NT];
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) acc[v][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const std::byte* gb = group + i * kBlockBytes;
        __m256i isum[V][NT];
        if constexpr (kEight) {
            for (int v = 0; v < V; ++v)
                for (int t = 0; t < NT; ++t) isum[v][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {
                if (h0 == 0) prefetch_ahead(gb, kBlockBytes, q, 8);
                __m256i mag[V], codes[V];
                for (int v = 0; v < V; ++v) {
                    codes[v] = load256(gb + 32 + 64 * q + 32 * (h0 + v));
                    mag[v] = _mm256_abs_epi8(codes[v]);
                }
                for (int t = 0; t < NT; ++t) {
                    const __m256i xq = bcast32(x + t * static_cast<int64_t>(x_stride) + i * 34 + 2 + 4 * q);
                    for (int v = 0; v < V; ++v) {
                        const __m256i pairs = _mm256_maddubs_epi16(mag[v], _mm256_sign_epi8(xq, codes[v]));
                        isum[v][t] = _mm256_add_epi32(isum[v][t], _mm256_madd_epi16(pairs, ones));
                    }
                }
            }
        } else {
            __m256i pairs[V][NT];
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                if (h0 == 0) prefetch_ahead(gb, kBlockBytes, q, 4);
                __m256i lo[V], hi[V];
                for (int v = 0; v < V; ++v) {
                    const __m256i c = load256(gb + 32 + 64 * q + 32 * (h0 + v));
                    lo[v] = _mm256_and_si256(c, low4);
                    hi[v] = _mm256_and_si256(_mm256_srli_epi16(c, 4), low4);
                }
                for (int t = 0; t < NT; ++t) {
                    const std::byte* xq = x + t * static_cast<int64_t>(x_stride) + i * 34 + 2 + 4 * q;
                    const __m256i xl = bcast32(xq), xh = bcast32(xq + 16);
                    for (int v = 0; v < V; ++v) {
                        const __m256i p = add_pairs(_mm256_maddubs_epi16(lo[v], xl), _mm256_maddubs_epi16(hi[v], xh));
                        pairs[v][t] = q == 0 ? p : add_pairs(pairs[v][t], p);
                    }
                }
            }
            for (int t = 0; t < NT; ++t) {
                // Sum of the token's 32 signed codes: unsigned sums of (code + 128), less 32 x 128.
                const __m256i codes = load256(x + t * static_cast<int64_t>(x_stride) + i * 34 + 2);
                const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
                const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
                const auto sum = static_cast<int32_t>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
                const __m256i offset = _mm256_set1_epi32(8 * sum);
                for (int v = 0; v < V; ++v)
                    isum[v][t] = _mm256_sub_epi32(_mm256_madd_epi16(pairs[v][t], ones), offset);
            }
        }
        for (int t = 0; t < NT; ++t) {
            uint16_t h;
            std::memcpy(&h, x + t * static_cast<int64_t>(x_stride) + i * 34, 2);
            const __m256 vdx = _mm256_set1_ps(_cvtsh_ss(h));
            for (int v = 0; v < V; ++v) {
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * (h0 + v))));
                acc[v][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[v][t]), _mm256_mul_ps(d, vdx), acc[v][t]);
            }
        }
    }
    for (int v = 0; v < V; ++v)
        for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * out_stride + kLaneRows * v, acc[v][t]);
}

using RowsFn = void (*)(int64_t, const std::byte*, int, const std::byte*, size_t, float*, int64_t) noexcept;

template <DType T, int NT, int V>
constexpr RowsFn rows_fn() noexcept {
    if constexpr (T == DType::Q6_K_R16) return q6_k_rows<NT, V>;
    else if constexpr (T == DType::Q6_K_R16B) return q6_k_r16b_rows<NT, V>;
    else if constexpr (T == DType::Q8_0_R16 || T == DType::Q4_0_R16) return legacy_rows<T, NT, V>;
    else return q45_k_rows<T, NT, V>;
}

// One token: the group's 16 rows in one pass. Two tokens: 8 rows at a time
// (the registers of 16 rows x 2 tokens would spill), the second pass over the
// group reading it from cache.
template <DType T>
void interleaved_matmul(int64_t k, const std::byte* w, size_t w_stride, int64_t a, int64_t b, const std::byte* x,
                        size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride) noexcept {
    constexpr RowsFn kOneToken = rows_fn<T, 1, 2>(), kOneTokenHalf = rows_fn<T, 1, 1>(), kTwoTokens = rows_fn<T, 2, 1>();
    const int64_t nb = k / (T == DType::Q8_0_R16 || T == DType::Q4_0_R16 ? 32 : 256);
    for (int64_t g = a; g < b; g += kGroupRows) {
        const std::byte* group = w + g * static_cast<int64_t>(w_stride);
        if (n_tokens == 1) {
            kOneToken(nb, group, 0, x, x_stride, out + g, out_stride);
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += 2) {
            const std::byte* xt = x + t0 * static_cast<int64_t>(x_stride);
            float* ot = out + t0 * out_stride + g;
            const RowsFn f = n_tokens - t0 >= 2 ? kTwoTokens : kOneTokenHalf;
            f(nb, group, 0, xt, x_stride, ot, out_stride);
            f(nb, group, 1, xt, x_stride, ot + kLaneRows, out_stride);
        }
    }
}

}  // namespace

bool avx2_interleaved_matmul(DType type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                             const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                             const RowClaims* claims) noexcept {
    const auto* wb = static_cast<const std::byte*>(w);
    const auto* xb = static_cast<const std::byte*>(x);
    const bool legacy = type == DType::Q8_0_R16 || type == DType::Q4_0_R16;
    if (legacy && n_tokens >= interleaved_block_gemm_min_tokens(type))
        return avx2_block_gemm(type, k, wb, w_stride, r0, r1, xb, x_stride, n_tokens, out, out_stride, claims);
    if (!legacy && n_tokens >= kAvx2KquantGemmTokens)
        return avx2_kquant_gemm(type, k, w, w_stride, r0, r1, x, x_stride, n_tokens, out, out_stride, claims);
    for_each_claimed(r0, r1, claims, [&](int64_t a, int64_t b) {
        switch (type) {
            case DType::Q4_K_R16: interleaved_matmul<DType::Q4_K_R16>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q5_K_R16: interleaved_matmul<DType::Q5_K_R16>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q8_0_R16: interleaved_matmul<DType::Q8_0_R16>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q4_0_R16: interleaved_matmul<DType::Q4_0_R16>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            case DType::Q6_K_R16: interleaved_matmul<DType::Q6_K_R16>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
            default: interleaved_matmul<DType::Q6_K_R16B>(k, wb, w_stride, a, b, xb, x_stride, n_tokens, out, out_stride); break;
        }
    });
    return true;
}

}  // namespace kiln::kernels::detail

#endif
