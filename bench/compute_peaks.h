#pragma once
// The compute roofline: how many multiply-adds per second this CPU's cores can
// do with each kind of instruction kiln's kernels use, measured by a short
// loop that keeps everything in registers (no memory traffic, enough
// independent accumulators to cover each instruction's latency), run on every
// thread of a pool at once. kiln-bench --compute-roofline holds prompt
// processing to these figures as --roofline holds generation to the memory
// bandwidth. docs/roofline.md says what each figure counts.
//
// Each loop is compiled for its own instruction set (target attributes) and
// run only where the CPU has it: the benches are built for the x86-64
// baseline.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/machine_limits.h"  // now_seconds(); <immintrin.h> with GCC 12's warnings silenced
#include "engine/kernels/amx_support.h"
#include "engine/kernels/cpu_features.h"
#include "engine/runtime/thread_pool.h"

namespace kiln::bench {

// One measured peak: multiply-adds per second over all threads.
struct ComputePeak {
    std::string name;     // "fp32 FMA (AVX-512)", "int8 VNNI (AVX-512)", "AMX int8", ...
    std::string kernels;  // the kernel set whose products it bounds ("avx512-vnni", "avx2", "amx")
    std::string family;   // "fp32" (float weights), "int8" (quantized weights), "bf16"
    double macs_per_second = 0;
};

namespace peak_loops {

// Each returns the multiply-adds it did (and folds its accumulators into
// `sink`, so that nothing is optimized away).
inline uint64_t fma_plain(int64_t iters, float& sink) {
    float acc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int64_t i = 0; i < iters; ++i)
        for (float& a : acc) a = a * 0.999999f + 1e-7f;
    for (float a : acc) sink += a;
    return static_cast<uint64_t>(iters) * 8;
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] inline uint64_t fma_avx2(int64_t iters, float& sink) {
    constexpr int kAcc = 12;  // latency 4 x 2 ports = 8 in flight; 12 leaves slack
    __m256 acc[kAcc];
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, a);
    __m256 s = acc[0];
    for (int k = 1; k < kAcc; ++k) s = _mm256_add_ps(s, acc[k]);
    sink += _mm256_cvtss_f32(s);
    return static_cast<uint64_t>(iters) * kAcc * 8;
}

[[gnu::target("avx512f")]] inline uint64_t fma_avx512(int64_t iters, float& sink) {
    constexpr int kAcc = 16;
    __m512 acc[kAcc];
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
    __m512 s = acc[0];
    for (int k = 1; k < kAcc; ++k) s = _mm512_add_ps(s, acc[k]);
    sink += _mm512_reduce_add_ps(s);
    return static_cast<uint64_t>(iters) * kAcc * 16;
}

// kiln's AVX2 int8 products: unsigned x signed bytes summed in pairs to int16
// (vpmaddubsw), pairs of those to int32 (vpmaddwd with ones), then added: 32
// multiply-adds per three instructions.
[[gnu::target("avx2")]] inline uint64_t int8_avx2(int64_t iters, float& sink) {
    // Five chains, in named variables (an array's elements, or a sixth chain,
    // were kept on the stack once the barrier below touched them).
    __m256i a0 = _mm256_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0;
    __m256i x0 = _mm256_set1_epi8(1), x1 = _mm256_set1_epi8(2), x2 = _mm256_set1_epi8(3), x3 = _mm256_set1_epi8(4),
            x4 = _mm256_set1_epi8(5);
    const __m256i s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < iters; ++i) {
        // The inputs "change" every iteration (an empty asm the compiler cannot
        // see through), else the loop-invariant products would be hoisted.
        __asm__ volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3), "+x"(x4));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, s), ones));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, s), ones));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(x2, s), ones));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(x3, s), ones));
        a4 = _mm256_add_epi32(a4, _mm256_madd_epi16(_mm256_maddubs_epi16(x4, s), ones));
    }
    const __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                       a4);
    sink += static_cast<float>(_mm256_extract_epi32(t, 0));
    return static_cast<uint64_t>(iters) * 5 * 32;
}

[[gnu::target("avx512f,avx512bw,avx512vnni")]] inline uint64_t int8_vnni512(int64_t iters, float& sink) {
    constexpr int kAcc = 16;  // vpdpbusd: latency 5, 2 per cycle on the cores that have two 512-bit ports
    __m512i acc[kAcc];
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_set1_epi32(k);
    const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, s);
    __m512i t = acc[0];
    for (int k = 1; k < kAcc; ++k) t = _mm512_add_epi32(t, acc[k]);
    sink += static_cast<float>(_mm512_reduce_add_epi32(t));
    return static_cast<uint64_t>(iters) * kAcc * 64;
}

// AMX: four accumulator tiles (16 rows x 16 int32 or fp32) fed by two A tiles
// and two B tiles loaded once; each TDPBSSD is 16 x 16 x 64 multiply-adds,
// each TDPBF16PS 16 x 16 x 32.
[[gnu::target("amx-tile,amx-int8,amx-bf16")]] inline uint64_t amx(int64_t iters, bool bf16, float& sink) {
    kiln::kernels::AmxTileConfig config;
    for (int t = 0; t < 8; ++t) {
        config.rows[t] = 16;
        config.bytes_per_row[t] = 64;
    }
    _tile_loadconfig(&config);
    alignas(64) static const uint8_t zeros[16 * 64] = {};
    alignas(64) float out[16 * 16];
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    if (bf16) {
        for (int64_t i = 0; i < iters; ++i) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        for (int64_t i = 0; i < iters; ++i) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    }
    _tile_stored(0, out, 64);
    _tile_release();
    sink += out[0];
    return static_cast<uint64_t>(iters) * 4 * 16 * 16 * (bf16 ? 32 : 64);
}
#endif

}  // namespace peak_loops

// Best of `reps` runs of `loop(iters, sink)` on every thread of the pool at
// once, in multiply-adds per second.
template <class Loop>
double measure_peak(kiln::ThreadPool& pool, int64_t iters, int reps, Loop&& loop) {
    double best = 0;
    std::vector<uint64_t> macs(static_cast<size_t>(pool.size()));
    std::vector<float> sinks(static_cast<size_t>(pool.size()) * 16);
    for (int rep = 0; rep < reps; ++rep) {
        const double t0 = now_seconds();
        pool.run([&](int ith, int) { macs[static_cast<size_t>(ith)] = loop(iters, sinks[static_cast<size_t>(ith) * 16]); });
        const double seconds = now_seconds() - t0;
        uint64_t total = 0;
        for (uint64_t m : macs) total += m;
        best = std::max(best, static_cast<double>(total) / seconds);
    }
    volatile float keep = 0;
    for (float s : sinks) keep = keep + s;
    return best;
}

// Every peak this CPU has, with the pool's threads. Each loop runs ~5-20 ms.
inline std::vector<ComputePeak> measure_compute_peaks(kiln::ThreadPool& pool) {
    namespace L = peak_loops;
    std::vector<ComputePeak> peaks;
    constexpr int kReps = 5;
#if defined(__x86_64__)
    const kiln::kernels::CpuFeatures& cpu = kiln::kernels::cpu_features();
    if (cpu.avx512_vnni) {
        peaks.push_back({"fp32 FMA (AVX-512)", "avx512-vnni", "fp32", measure_peak(pool, 1 << 20, kReps, L::fma_avx512)});
        peaks.push_back({"int8 VNNI (AVX-512)", "avx512-vnni", "int8", measure_peak(pool, 1 << 20, kReps, L::int8_vnni512)});
    }
    if (cpu.x86_64_v3) {
        peaks.push_back({"fp32 FMA (AVX2)", "avx2", "fp32", measure_peak(pool, 1 << 21, kReps, L::fma_avx2)});
        peaks.push_back({"int8 vpmaddubsw (AVX2)", "avx2", "int8", measure_peak(pool, 1 << 20, kReps, L::int8_avx2)});
    }
    const kiln::kernels::AmxSupport& amx = kiln::kernels::amx_support();
    if (amx.int8)
        peaks.push_back({"AMX int8", "amx", "int8", measure_peak(pool, 1 << 16, kReps, [](int64_t n, float& s) {
                             return L::amx(n, false, s);
                         })});
    if (amx.bf16)
        peaks.push_back({"AMX bf16", "amx", "bf16", measure_peak(pool, 1 << 16, kReps, [](int64_t n, float& s) {
                             return L::amx(n, true, s);
                         })});
    if (!peaks.empty()) return peaks;
#endif
    peaks.push_back({"fp32 multiply-add (scalar)", "scalar", "fp32", measure_peak(pool, 1 << 22, kReps, L::fma_plain)});
    return peaks;
}

}  // namespace kiln::bench
