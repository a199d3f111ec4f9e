#pragma once
// The scale searches behind ggml's K-quant reference quantizers (ggml-quants.c,
// llama.cpp c392e509), kept under ggml's names so each can be read side by side
// with its original. Each picks the codes L of n values x and returns the scale
// (and, for make_qkx2_quants, the minimum) that the quantizer then re-quantizes
// against. They are bit-exact with ggml: same float operation order, same
// nearest_int rounding, same tie-breaking (a later candidate wins only when it is
// strictly better). Shared by the K-quant quantizers, the quant-mix helper and
// IQ4's search.
#include <cstdint>

namespace kiln::quant {

// Symmetric codes L[i] in [0, 2*nmax) (code - nmax is the signed value). The
// scale is fitted by weighted least squares; rmse_type picks the weights when
// qw is null: 1 = x^2, 2 = 1, 3 = |x|, other = sqrt|x|. rmse_type 0 returns the
// plain max-based scale; a negative rmse_type returns after the first fit (the
// mean of it and the max-based scale). Blocks with max|x| < 1e-15 get all-zero
// codes and scale 0.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);

// Q3_K's symmetric search: codes in [0, 2*nmax); with do_rmse, a few rounds of
// coordinate descent on the x^2-weighted error after the max-based start.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Asymmetric codes L[i] in [0, nmax] with x ~ scale * L - the_min (the_min >= 0).
// Tries nstep + 1 inverse scales (rmin + rdelta * is + nmax) / (max - min), fits
// scale and min by weighted least squares for each, keeps the one with least
// weighted |error| (use_mad) or squared error. Laux is n bytes of scratch.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// Sub-block j's 6-bit scale and min of a Q4_K/Q5_K 12-byte scales array: j < 4
// in the low 6 bits of bytes j and j + 4; j >= 4 as a nibble in byte j + 4 with
// the top two bits in the spare high bits of bytes j - 4 (scale) and j (min).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) noexcept {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

}  // namespace kiln::quant
