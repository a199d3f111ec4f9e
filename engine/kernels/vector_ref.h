#pragma once
// Plain scalar twins of the row kernels in vector.h, the yardstick the xsimd
// versions are tested against. They are written for clarity and exactness, not
// speed: every transcendental function and every sum is evaluated in double and
// rounded to float once at the end, so each result is within about one float
// rounding of the mathematically exact value. Same signatures and aliasing
// rules as vector.h (out == x allowed, partial overlap not).
#include <cstdint>

#include "engine/kernels/rope_spec.h"

namespace kiln::kernels::ref {

void add(const float* a, const float* b, float* out, int64_t n) noexcept;
void mul(const float* a, const float* b, float* out, int64_t n) noexcept;
void scale(const float* x, float s, float* out, int64_t n) noexcept;
void softcap(const float* x, float cap, float* out, int64_t n) noexcept;

void relu(const float* x, float* out, int64_t n) noexcept;
void silu(const float* x, float* out, int64_t n) noexcept;
void gelu_tanh(const float* x, float* out, int64_t n) noexcept;
void gelu_erf(const float* x, float* out, int64_t n) noexcept;
void swiglu(const float* gate, const float* up, float* out, int64_t n) noexcept;
float dot(const float* a, const float* b, int64_t n) noexcept;  // summed in double

void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n) noexcept;
void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* out, int64_t n) noexcept;

void softmax(const float* x, float* out, int64_t n) noexcept;

void rope(float* x, const RopeSpec& s, int64_t pos, const float* freq_factors) noexcept;
// Mode 0, no scaling: rope(x, {n_heads, head_dim, n_rot, freq_base}, pos, nullptr).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base) noexcept;

}  // namespace kiln::kernels::ref
