// Included LAST by a reference conversion or dot product file (no include
// guard on purpose: it is a switch for the rest of that file): switches off
// floating-point contraction for the functions defined after it.
//
// ggml's reference code is C compiled in ISO mode, where `a * b + c` rounds the
// product before the addition. In C++ GCC contracts a product and a later
// addition into one FMA even across statements (-ffp-contract=fast is its
// default outside ISO C), and -march=native offers FMA, which changes quantized
// codes and dequantized values whenever a product lands near a rounding
// boundary; the fixture tests (tests/test_quant_*.cpp) have such values.
// clang's default, -ffp-contract=on, already keeps statements apart; an
// explicit -ffp-contract=fast makes clang ignore the pragma by design, and the
// fixture tests then fail rather than letting the bytes drift.
//
// Last, because GCC applies the optimize pragma to every function defined
// after it: the inline helpers of earlier headers keep the file's defaults.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
