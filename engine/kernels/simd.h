#pragma once
// The one way kernels include SIMD headers: xsimd, and the raw x86 intrinsics
// used where xsimd has no instruction (VNNI, maddubs, F16C).
//
// GCC 12 reports the deliberately undefined registers of its own AVX-512
// intrinsics (_mm512_undefined_ps, also used by xsimd) as uninitialized once
// they are inlined (GCC bug 105593); the warning is silenced for these headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
