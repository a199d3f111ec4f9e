#pragma once
// The one way kernels include SIMD headers: xsimd, and the raw intrinsics used
// where xsimd has no instruction (x86: VNNI, maddubs, F16C; aarch64: sdot,
// widening int8 multiplies, half conversions).
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
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
