#pragma once
// Row-wise float kernels: element-wise arithmetic, activations, normalizations,
// softmax and rotary position embedding. Each has a plain scalar twin in
// namespace kiln::kernels::ref (vector_ref.h) that the fast xsimd version is
// tested against. All pointers may alias exactly (in-place: out == x) but must
// not partially overlap. n is the element count of one row.
#include <cstdint>

namespace kiln::kernels {

void add(const float* a, const float* b, float* out, int64_t n) noexcept;
void mul(const float* a, const float* b, float* out, int64_t n) noexcept;
void scale(const float* x, float s, float* out, int64_t n) noexcept;

void relu(const float* x, float* out, int64_t n) noexcept;             // NaN passes through, as torch.relu
void silu(const float* x, float* out, int64_t n) noexcept;            // x * sigmoid(x)
void gelu_tanh(const float* x, float* out, int64_t n) noexcept;       // GPT-2's tanh approximation
void gelu_erf(const float* x, float* out, int64_t n) noexcept;        // exact: 0.5 x (1 + erf(x / sqrt 2))
void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept;  // silu(gate) * up

// out = x / sqrt(mean(x²) + eps) * weight   (weight may be null: no scaling)
void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept;
// out = (x - mean) / sqrt(var + eps) * weight + bias   (weight, bias may be null)
void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept;

// Max-subtracted softmax: finite for any finite input (no inf/NaN for large values).
// A row that is all -inf (fully masked) gives zeros, as attend does.
void softmax(const float* x, float* out, int64_t n) noexcept;

// Rotary position embedding, the interleaved-pair form llama.cpp uses for the
// `llama` architecture (rope mode 0): within each head of head_dim values, pairs
// (x[2i], x[2i+1]) for 2i < n_rot are rotated by angle pos * base^(-2i / n_rot).
// x holds n_heads heads of head_dim values, rotated in place.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base) noexcept;

}  // namespace kiln::kernels
