#pragma once
// Reference dequantizers and quantizers of IQ4_NL (32-blocks) and IQ4_XS (256-blocks), both
// indexing kIQ4NLValues; bit-exact with ggml's dequantize_row_iq4_nl/_xs.
#include <cstdint>

namespace kiln::quant {

void iq4_nl_to_float(const void* src, float* dst, int64_t n);
void iq4_xs_to_float(const void* src, float* dst, int64_t n);

// The quantizers llama-quantize runs without an importance matrix (ggml's
// quantize_iq4_nl / quantize_iq4_xs, weights x^2, 7 tries): iq4_search.cpp.
void iq4_nl_from_float_ref(const float* src, void* dst, int64_t n);
void iq4_xs_from_float_ref(const float* src, void* dst, int64_t n);

}  // namespace kiln::quant
