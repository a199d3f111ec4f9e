#pragma once
// Reference conversions of the K-quants Q2_K..Q6_K (super-blocks of 256),
// bit-exact with ggml's dequantize_row_q*_K and quantize_row_q*_K_ref
// (llama.cpp c392e509): the bytes llama-quantize writes without an importance
// matrix. n is an element count, a multiple of 256. Blocks are read and written
// with memcpy, so src/dst need no alignment.
//
// Inputs holding inf or NaN give a defined block (no undefined behaviour: every
// float-to-int step goes through nearest_int's bit trick and clamps), but its
// values are meaningless; ggml makes the same computation.
#include <cstdint>

namespace kiln::quant {

void q2_k_from_float_ref(const float* src, void* dst, int64_t n);
void q2_k_to_float(const void* src, float* dst, int64_t n);

void q3_k_from_float_ref(const float* src, void* dst, int64_t n);
void q3_k_to_float(const void* src, float* dst, int64_t n);

void q4_k_from_float_ref(const float* src, void* dst, int64_t n);
void q4_k_to_float(const void* src, float* dst, int64_t n);

void q5_k_from_float_ref(const float* src, void* dst, int64_t n);
void q5_k_to_float(const void* src, float* dst, int64_t n);

void q6_k_from_float_ref(const float* src, void* dst, int64_t n);
void q6_k_to_float(const void* src, float* dst, int64_t n);

}  // namespace kiln::quant
