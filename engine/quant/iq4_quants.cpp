#include "engine/quant/iq4_quants.h"

#include <cstddef>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/blocks.h"

// Reference file: no FMA contraction, as ggml's C code (see engine/core/no_fp_contract.h).
#include "engine/core/no_fp_contract.h"

namespace kiln::quant {
namespace {

// One 32-element group of table codes, nibble order as Q4_0.
void decode_group(const uint8_t* qs, float d, float* y) {
    for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>(kIQ4NLValues[qs[j] & 0x0F]);
        y[j + 16] = d * static_cast<float>(kIQ4NLValues[qs[j] >> 4]);
    }
}

}  // namespace

void iq4_nl_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK4_NL; ++b) {
        const auto block = load_block<BlockIQ4_NL>(src, b);
        decode_group(block.qs, fp16_to_fp32(block.d), dst + b * kQK4_NL);
    }
}

void iq4_xs_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockIQ4_XS>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int group = 0; group < kQK_K / 32; ++group) {
            // 6-bit scale: low nibble from scales_l, top two bits from scales_h.
            const int low = (block.scales_l[group / 2] >> (4 * (group % 2))) & 0x0F;
            const int high = (block.scales_h >> (2 * group)) & 0x03;
            const float dl = d * static_cast<float>((low | (high << 4)) - 32);
            decode_group(block.qs + 16 * group, dl, dst + b * kQK_K + 32 * group);
        }
    }
}

}  // namespace kiln::quant
