// Dropout's row kernel (see dropout.h) and its scalar twin.
#include "engine/kernels/dropout.h"

namespace kiln::kernels {

void dropout::apply(const float* in, float* out, int64_t n, uint64_t key, uint64_t first_index, float p) noexcept {
    for (int64_t i = 0; i < n; ++i) {
        const float keep = uniform(key, first_index + static_cast<uint64_t>(i)) >= p ? 1.0f : 0.0f;
        out[i] = keep * (in[i] / (1.0f - p));
    }
}

void ref::dropout::apply(const float* in, float* out, int64_t n, uint64_t key, uint64_t first_index, float p) noexcept {
    for (int64_t i = 0; i < n; ++i) {
        const bool keep = kernels::dropout::uniform(key, first_index + static_cast<uint64_t>(i)) >= p;
        out[i] = keep ? in[i] / (1.0f - p) : 0.0f;
    }
}

}  // namespace kiln::kernels
