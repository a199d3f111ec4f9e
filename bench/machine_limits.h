#pragma once
// What the benchmark programs share about the machine they run on: its CPU
// name and L3 size as the kernel reports them (Linux's /proc and /sys, sysctl
// on macOS and the BSDs, "unknown" elsewhere), and its memory read bandwidth
// measured the way a matrix-vector product reads weights (the roofline that
// kiln-kernel-bench and kiln-bench --roofline hold decoding to).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#if defined(__x86_64__)
// GCC 12 flags the undefined registers inside its own AVX-512 intrinsics as
// uninitialized once inlined (GCC bug 105593); silence it where they are read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "engine/core/platform.h"
#include "engine/kernels/cpu_features.h"
#include "engine/runtime/thread_pool.h"

namespace kiln::bench {

inline double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::string read_cpu_model() {
#if KILN_OS_LINUX
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
#elif KILN_OS_SYSCTLBYNAME
    for (const char* name : {"machdep.cpu.brand_string", "hw.model"})
        if (const auto model = kiln::os::sysctl_string(name); model && !model->empty()) return *model;
#endif
    return "unknown";
}

inline std::string read_l3_size() {
#if KILN_OS_LINUX
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
    std::string size;
    if (!(in >> size)) return "unknown";
    if (size.size() > 1 && size.back() == 'K') {  // sysfs writes e.g. "266240K"
        try {
            return fmt::format("{} MiB", std::stoll(size.substr(0, size.size() - 1)) / 1024);
        } catch (const std::exception&) {
        }
    }
    return size;
#else
#if KILN_OS_SYSCTLBYNAME
    if (const auto bytes = kiln::os::sysctl_integer("hw.l3cachesize"); bytes && *bytes > 0)  // Intel Macs
        return fmt::format("{} MiB", *bytes / 1048576);
#endif
    return "unknown";
#endif
}

// Best-of-reps read bandwidth in GB/s over `words` 64-bit words at `data`.
// Each thread reads its share as kStreams interleaved sequential streams, the
// way a matvec reads several weight rows at once: on this machine 2 streams
// draw about 10% more than one (and more than 4 or 8), and the kernels should
// be held to the best the memory system gives, not to a weak reference.
// The sum of `streams` runs of `per` words (per a multiple of 8) read side by
// side, with the widest loads this CPU has: the benches are built for the
// x86-64 baseline, so the wide forms are compiled for their own instruction
// set alone and called only where the CPU has it (kernels/cpu_features.h).
inline uint64_t read_streams_plain(const uint64_t* base, int64_t per, int64_t streams) {
    uint64_t lanes[8] = {};
    for (int64_t i = 0; i < per; i += 8)
        for (int64_t s = 0; s < streams; ++s)
            for (int64_t j = 0; j < 8; ++j) lanes[j] += base[s * per + i + j];
    uint64_t total = 0;
    for (uint64_t v : lanes) total += v;
    return total;
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] inline uint64_t read_streams_avx2(const uint64_t* base, int64_t per, int64_t streams) {
    __m256i acc = _mm256_setzero_si256();
    for (int64_t i = 0; i < per; i += 8)
        for (int64_t s = 0; s < streams; ++s) {
            const auto* p = reinterpret_cast<const __m256i*>(base + s * per + i);
            acc = _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1)));
        }
    return static_cast<uint64_t>(_mm256_extract_epi64(acc, 0) + _mm256_extract_epi64(acc, 1) +
                                 _mm256_extract_epi64(acc, 2) + _mm256_extract_epi64(acc, 3));
}
[[gnu::target("avx512f")]] inline uint64_t read_streams_avx512(const uint64_t* base, int64_t per, int64_t streams) {
    __m512i acc = _mm512_setzero_si512();
    for (int64_t i = 0; i < per; i += 8)
        for (int64_t s = 0; s < streams; ++s) acc = _mm512_add_epi64(acc, _mm512_loadu_si512(base + s * per + i));
    return static_cast<uint64_t>(_mm512_reduce_add_epi64(acc));
}
#endif
inline uint64_t read_streams(const uint64_t* base, int64_t per, int64_t streams) {
#if defined(__x86_64__)
    if (kiln::kernels::cpu_features().x86_64_v4) return read_streams_avx512(base, per, streams);
    if (kiln::kernels::cpu_features().x86_64_v3) return read_streams_avx2(base, per, streams);
#endif
    return read_streams_plain(base, per, streams);
}

inline double measure_bandwidth(kiln::ThreadPool& pool, const uint64_t* data, size_t words, int reps) {
    constexpr int64_t kStreams = 2;
    constexpr int64_t kWordsPerStep = 8;  // one 64-byte line per stream per step
    double best = 0;
    std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()) * 8);
    for (int rep = 0; rep < reps; ++rep) {
        size_t bytes_read = 0;
        std::vector<size_t> per_thread(static_cast<size_t>(pool.size()));
        const double t0 = now_seconds();
        pool.run([&](int ith, int nth) {
            const auto [b, e] = kiln::split_range(static_cast<int64_t>(words), ith, nth);
            const int64_t per = (e - b) / kStreams / kWordsPerStep * kWordsPerStep;
            const uint64_t* base = data + b;
            const uint64_t total = read_streams(base, per, kStreams);
            sinks[static_cast<size_t>(ith) * 8] = total;
            per_thread[static_cast<size_t>(ith)] = static_cast<size_t>(per * kStreams) * 8;
        });
        const double seconds = now_seconds() - t0;
        for (size_t b : per_thread) bytes_read += b;
        best = std::max(best, static_cast<double>(bytes_read) / seconds / 1e9);
    }
    volatile uint64_t keep = 0;
    for (uint64_t s : sinks) keep = keep + s;
    return best;
}

// A buffer of `bytes` (rounded down to whole words) with every page touched,
// so that timing it measures reads, not page faults.
struct BandwidthBuffer {
    size_t words;
    std::unique_ptr<uint64_t[]> data;

    explicit BandwidthBuffer(size_t bytes) : words(bytes / 8), data(std::make_unique_for_overwrite<uint64_t[]>(words)) {
        for (size_t i = 0; i < words; ++i) data[i] = i;
    }
    double measure(kiln::ThreadPool& pool, int reps) const { return measure_bandwidth(pool, data.get(), words, reps); }
};

}  // namespace kiln::bench
