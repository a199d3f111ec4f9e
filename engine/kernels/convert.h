#pragma once
// Rows of floats to and from IEEE half precision (an F16 KV cache): F16C's
// vcvtps2ph / vcvtph2ps where the build has them, else the scalar conversions
// of engine/core/half.h, which give the same bits (round to nearest even;
// NaNs quieted) and are the reference the fast rows are tested against.
#include <cstdint>

namespace kiln::kernels {

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) noexcept;
void fp16_to_fp32_row(const uint16_t* x, float* out, int64_t n) noexcept;

}  // namespace kiln::kernels
