// Scalar reference K-quant dots; see dot_kquants_ref.h. Bit layouts follow
// ggml-common.h / ggml-quants.c (dequantize_row_q*_K), written from the formats.
#include "engine/kernels/dot_kquants_ref.h"

#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"

// Same floating-point rules as the reference quantizers (no FMA contraction),
// so the one multiply-subtract per super-block rounds as ggml's C does.
#include "engine/core/no_fp_contract.h"

namespace kiln::kernels {
namespace {

using namespace kiln::quant;

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (of 8) from the 12
// packed bytes: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 in the
// nibbles of byte j + 4 with their top 2 bits in the top bits of bytes j - 4, j.
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) noexcept {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

void unpack_q2_k(const std::byte* p, UnpackedSuperBlock& u) noexcept {
    BlockQ2_K b;
    std::memcpy(&b, p, sizeof(b));
    for (int e = 0; e < 256; ++e) {
        const int half = e / 128, group = (e % 128) / 32, l = e % 32;
        u.codes[e] = static_cast<int8_t>((b.qs[32 * half + l] >> (2 * group)) & 3);
    }
    for (int s = 0; s < 16; ++s) {
        u.scales[s] = static_cast<int16_t>(b.scales[s] & 0x0F);
        u.mins[s] = static_cast<int16_t>(b.scales[s] >> 4);
    }
    u.d = fp16_to_fp32(b.d);
    u.dmin = fp16_to_fp32(b.dmin);
}

void unpack_q3_k(const std::byte* p, UnpackedSuperBlock& u) noexcept {
    BlockQ3_K b;
    std::memcpy(&b, p, sizeof(b));
    for (int e = 0; e < 256; ++e) {
        const int half = e / 128, group = (e % 128) / 32, l = e % 32;
        const int low = (b.qs[32 * half + l] >> (2 * group)) & 3;
        const bool high = (b.hmask[l] >> (4 * half + group)) & 1;
        u.codes[e] = static_cast<int8_t>(low - (high ? 0 : 4));
    }
    // 16 six-bit scales: low 4 bits in the nibbles of bytes 0-7 (scale s in
    // byte s % 8, high nibble for s >= 8), top 2 bits in bytes 8-11 (scale s in
    // byte 8 + s % 4, bits 2 * (s / 4)); stored offset by 32.
    for (int s = 0; s < 16; ++s) {
        const int low = (b.scales[s % 8] >> (4 * (s / 8))) & 0x0F;
        const int high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        u.scales[s] = static_cast<int16_t>((low | (high << 4)) - 32);
        u.mins[s] = 0;
    }
    u.d = fp16_to_fp32(b.d);
    u.dmin = 0.0f;
}

template <bool FifthBit, class Block>
void unpack_q45_k(const Block& b, UnpackedSuperBlock& u) noexcept {
    for (int e = 0; e < 256; ++e) {
        const int chunk = e / 64, l = e % 64;
        const uint8_t byte = b.qs[32 * chunk + l % 32];
        int q = l < 32 ? (byte & 0x0F) : (byte >> 4);
        if constexpr (FifthBit) {
            const int bit = 2 * chunk + (l < 32 ? 0 : 1);
            q += ((b.qh[l % 32] >> bit) & 1) << 4;
        }
        u.codes[e] = static_cast<int8_t>(q);
    }
    for (int j = 0; j < 8; ++j) {
        int sc = 0, m = 0;
        scale_min_k4(j, b.scales, sc, m);
        u.scales[2 * j] = u.scales[2 * j + 1] = static_cast<int16_t>(sc);
        u.mins[2 * j] = u.mins[2 * j + 1] = static_cast<int16_t>(m);
    }
    u.d = fp16_to_fp32(b.d);
    u.dmin = fp16_to_fp32(b.dmin);
}

void unpack_q6_k(const std::byte* p, UnpackedSuperBlock& u) noexcept {
    BlockQ6_K b;
    std::memcpy(&b, p, sizeof(b));
    // Per half of 128: ql bytes [64h, 64h + 64), qh bytes [32h, 32h + 32).
    // Element 32m + l (m < 4, l < 32) of the half: low 4 bits from ql[l + 32 * (m % 2)]
    // (low nibble for m < 2, high for m >= 2), high 2 bits from qh[l] bits 2m.
    for (int e = 0; e < 256; ++e) {
        const int half = e / 128, m = (e % 128) / 32, l = e % 32;
        const uint8_t lb = b.ql[64 * half + l + 32 * (m % 2)];
        const int low = m < 2 ? (lb & 0x0F) : (lb >> 4);
        const int high = (b.qh[32 * half + l] >> (2 * m)) & 3;
        u.codes[e] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    for (int s = 0; s < 16; ++s) {
        u.scales[s] = b.scales[s];
        u.mins[s] = 0;
    }
    u.d = fp16_to_fp32(b.d);
    u.dmin = 0.0f;
}

template <DType T>
float dot_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept {
    const int64_t nb = k / kQK_K;
    const int64_t wbytes = static_cast<int64_t>(type_traits(T).block_bytes);
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        UnpackedSuperBlock u;
        unpack_kquant_block(T, w + i * wbytes, u);
        BlockQ8_K xb;
        std::memcpy(&xb, x + i * static_cast<int64_t>(sizeof(BlockQ8_K)), sizeof(xb));
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 16; ++s) {
            int32_t part = 0;
            for (int l = 0; l < 16; ++l) part += static_cast<int32_t>(u.codes[16 * s + l]) * xb.qs[16 * s + l];
            isum += u.scales[s] * part;
            msum += u.mins[s] * static_cast<int32_t>(xb.bsums[s]);
        }
        const float dall = xb.d * u.d;
        const float dmin = xb.d * u.dmin;
        sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(msum);
    }
    return sum;
}

}  // namespace

bool is_kquant(DType type) noexcept {
    switch (type) {
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: return true;
        default: return false;
    }
}

void unpack_kquant_block(DType type, const std::byte* block, UnpackedSuperBlock& out) noexcept {
    switch (type) {
        case DType::Q2_K: unpack_q2_k(block, out); break;
        case DType::Q3_K: unpack_q3_k(block, out); break;
        case DType::Q4_K: {
            BlockQ4_K b;
            std::memcpy(&b, block, sizeof(b));
            unpack_q45_k<false>(b, out);
            break;
        }
        case DType::Q5_K: {
            BlockQ5_K b;
            std::memcpy(&b, block, sizeof(b));
            unpack_q45_k<true>(b, out);
            break;
        }
        case DType::Q6_K: unpack_q6_k(block, out); break;
        default: std::memset(&out, 0, sizeof(out)); break;
    }
}

float dot_q2_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept { return dot_ref<DType::Q2_K>(k, w, x); }
float dot_q3_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept { return dot_ref<DType::Q3_K>(k, w, x); }
float dot_q4_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept { return dot_ref<DType::Q4_K>(k, w, x); }
float dot_q5_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept { return dot_ref<DType::Q5_K>(k, w, x); }
float dot_q6_k_q8_k_ref(int64_t k, const std::byte* w, const std::byte* x) noexcept { return dot_ref<DType::Q6_K>(k, w, x); }

}  // namespace kiln::kernels
