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

#if defined(__AVX512F__)
// GCC 12 flags the undefined registers inside its own AVX-512 intrinsics as
// uninitialized once inlined (GCC bug 105593); silence it where they are read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "engine/core/platform.h"
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
#if defined(__AVX512F__)
            __m512i acc = _mm512_setzero_si512();
            for (int64_t i = 0; i < per; i += kWordsPerStep)
                for (int64_t s = 0; s < kStreams; ++s)
                    acc = _mm512_add_epi64(acc, _mm512_loadu_si512(base + s * per + i));
            alignas(64) uint64_t lanes[8];
            _mm512_store_si512(lanes, acc);
#else
            uint64_t lanes[8] = {};
            for (int64_t i = 0; i < per; i += kWordsPerStep)
                for (int64_t s = 0; s < kStreams; ++s)
                    for (int64_t j = 0; j < kWordsPerStep; ++j) lanes[j] += base[s * per + i + j];
#endif
            uint64_t total = 0;
            for (uint64_t v : lanes) total += v;
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
