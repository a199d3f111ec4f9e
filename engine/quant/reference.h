#pragma once
// Plain reference conversions between float and kiln's storage types, bit-exact
// with ggml's reference implementations (the `_ref` quantizers in ggml-quants.c
// and ggml's round-to-nearest-even fp16/bf16 conversions). Fast kernels are
// tested against these. Every n is an element count; for block types it must be
// a multiple of the block size.
#include <cstdint>

namespace kiln::quant {

void f32_from_float(const float* src, void* dst, int64_t n);
void f32_to_float(const void* src, float* dst, int64_t n);

void f16_from_float_ref(const float* src, void* dst, int64_t n);
void f16_to_float(const void* src, float* dst, int64_t n);

void bf16_from_float_ref(const float* src, void* dst, int64_t n);
void bf16_to_float(const void* src, float* dst, int64_t n);

void q8_0_from_float_ref(const float* src, void* dst, int64_t n);
void q8_0_to_float(const void* src, float* dst, int64_t n);

void q4_0_from_float_ref(const float* src, void* dst, int64_t n);
void q4_0_to_float(const void* src, float* dst, int64_t n);

// Q8_K, the activation type of the K-quant dot products (blocks of 256).
void q8_k_from_float_ref(const float* src, void* dst, int64_t n);
void q8_k_to_float(const void* src, float* dst, int64_t n);

}  // namespace kiln::quant
