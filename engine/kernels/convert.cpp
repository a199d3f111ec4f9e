#include "engine/kernels/convert.h"

#include "engine/core/half.h"
#include "engine/kernels/simd.h"

namespace kiln::kernels {

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) noexcept {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
#endif
    for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace kiln::kernels
