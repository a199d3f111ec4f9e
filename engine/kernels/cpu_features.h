#pragma once
// What this CPU (and its operating system) lets the kernel targets use, asked
// once. A target is offered only when every instruction its compiler flags
// allow is here: the AVX2 target is compiled for x86-64-v3, so it needs all of
// v3 (AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE, and the OS saving YMM state), not
// just AVX2.
namespace kiln::kernels {

struct CpuFeatures {
    bool x86_64_v3 = false;    // AVX, AVX2, FMA, F16C, BMI1, BMI2, LZCNT, MOVBE; YMM state enabled
    bool x86_64_v4 = false;    // v3 and AVX-512 F, CD, BW, DQ, VL; ZMM state enabled
    bool avx512_vnni = false;  // v4 and AVX512_VNNI
    bool arm_dotprod = false;  // aarch64 SDOT/UDOT (FEAT_DotProd)
    bool arm_i8mm = false;     // aarch64 SMMLA (FEAT_I8MM)
};

const CpuFeatures& cpu_features() noexcept;

}  // namespace kiln::kernels
