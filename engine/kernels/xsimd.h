#pragma once
// The one way kernels include xsimd.
//
// GCC 12 reports the deliberately undefined registers of its own AVX-512
// intrinsics (_mm512_undefined_ps, used by xsimd) as uninitialized once they
// are inlined (GCC bug 105593); the warning is silenced for the xsimd headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
