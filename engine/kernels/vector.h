#pragma once
// Row-wise float kernels: element-wise arithmetic, activations, normalizations,
// softmax and rotary position embedding. Each has a plain scalar twin in
// namespace kiln::kernels::ref (vector_ref.h) that the fast xsimd version is
// tested against. All pointers may alias exactly (in-place: out == x) but must
// not partially overlap. n is the element count of one row.
#include <cstdint>

#include "engine/kernels/rope_spec.h"

namespace kiln::kernels {

void add(const float* a, const float* b, float* out, int64_t n) noexcept;
void mul(const float* a, const float* b, float* out, int64_t n) noexcept;
void scale(const float* x, float s, float* out, int64_t n) noexcept;
// out = cap * tanh(x / cap) (x times 1/cap, then tanh, then times cap, as llama.cpp orders it).
void softcap(const float* x, float cap, float* out, int64_t n) noexcept;

void relu(const float* x, float* out, int64_t n) noexcept;             // NaN passes through, as torch.relu
void silu(const float* x, float* out, int64_t n) noexcept;            // x * sigmoid(x)
void gelu_tanh(const float* x, float* out, int64_t n) noexcept;       // GPT-2's tanh approximation
void gelu_erf(const float* x, float* out, int64_t n) noexcept;        // exact: 0.5 x (1 + erf(x / sqrt 2))
void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept;  // silu(gate) * up

// Σ a[i] b[i] in float lanes (the sum's rounding depends on the lane width of
// the kernel target; use ref::dot for a width-independent answer).
float dot(const float* a, const float* b, int64_t n) noexcept;

// out = x / sqrt(mean(x²) + eps) * weight   (weight may be null: no scaling)
void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept;
// out = (x - mean) / sqrt(var + eps) * weight + bias   (weight, bias may be null)
void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept;

// Max-subtracted softmax: finite for any finite input (no inf/NaN for large values).
// A row that is all -inf (fully masked) gives zeros, as attend does.
void softmax(const float* x, float* out, int64_t n) noexcept;

// Rotary position embedding (rope_spec.h): within each head of head_dim
// values, pair i < n_rot/2 ((x[2i], x[2i+1]) or, Neox, (x[i], x[i + n_rot/2]))
// is rotated by angle pos * base^(-2i / n_rot) / freq_factors[i] (factors may
// be null), scaled as the spec says. x holds n_heads heads, rotated in place.
void rope(float* x, const RopeSpec& s, int64_t pos, const float* freq_factors) noexcept;
// Mode 0, no scaling: rope(x, {n_heads, head_dim, n_rot, freq_base}, pos, nullptr).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base) noexcept;

}  // namespace kiln::kernels
