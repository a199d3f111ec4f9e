#pragma once
// The one way kernels include raw x86 intrinsics (for what xsimd lacks: VNNI,
// maddubs, F16C). GCC 12 reports the deliberately undefined registers of its
// AVX-512 intrinsics as uninitialized once inlined (GCC bug 105593); the
// warning is silenced for this header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
