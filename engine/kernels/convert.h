#pragma once
// Rows of floats to IEEE half precision (writing an F16 KV cache): F16C's
// vcvtps2ph where the build has it, else the scalar conversion of
// engine/core/half.h, which gives the same bits (round to nearest even, NaNs
// quieted) and is the reference the fast rows are tested against. (Reading
// halves back is done by the attention kernel's own loads.)
#include <cstdint>

namespace kiln::kernels {

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) noexcept;

}  // namespace kiln::kernels
