// kiln-kernel-bench: how close the matmul kernels come to this machine's limits.
//
// It measures the limits itself, in the same process, with the same threads:
//  * memory read bandwidth: summing a 1 GiB buffer (4x the L3), best of
//    several passes, per thread count;
//  * FMA peak: a loop of independent vector FMAs with no memory traffic.
// and then times the kernels against them:
//  * matvec (decode, 1 token) GB/s = weight bytes / time, as a % of bandwidth;
//  * batched matmul (128 tokens) GFLOP/s = 2 rows k tokens / time, as a % of
//    the FMA peak (for int8 kernels that is an equivalent-work rate, not FMAs).
//
// Hot vs streaming. This machine reports a 260 MiB L3 (a virtualized, shared
// cache), so a single 2-32 MB weight matrix read over and over stays in L3
// (or L2) and its "bandwidth" is cache bandwidth, not DRAM. Each matvec is
// therefore timed twice: "hot" repeats one matrix (what a tiny model whose
// weights fit in cache sees), "streaming" cycles through distinct copies
// totalling 1 GiB (each copy perturbed so no two pages are identical), which
// is what decoding a real model does: weights come from DRAM. Only the
// streaming figure is comparable with DRAM bandwidth.
//
// The machine is shared (other virtual machines, other jobs), and its
// bandwidth and FMA rate drift by tens of percent from minute to minute. So
// the streaming and batched rows are each compared with a bandwidth / FMA peak
// measured again just before them ("now" columns), on a buffer the same size
// as the streaming set, so that whatever share of it the L3 keeps counts the
// same on both sides.
//
// Work is split across a kiln::ThreadPool by rows (kiln::split_range), inside
// one pool run with a barrier between matmuls, as the graph executor runs them.
// Activation preparation (quantizing x to Q8_0) happens once, outside the timing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>


#include "bench/machine_limits.h"
#include "engine/core/dtype.h"
#include "engine/kernels/cpu_features.h"
#include "engine/kernels/matmul.h"
#include "engine/quant/interleave.h"
#include "engine/runtime/thread_pool.h"
#include "tools/common/cli.h"
#include "tools/common/version.h"

namespace {

using kiln::DType;
using kiln::kernels::MatmulKernels;

constexpr const char* kUsage = R"(usage: kiln-kernel-bench [options]

Measures memory bandwidth and FMA peak, then matmul kernel throughput against them.

options:
  -t, --threads LIST   thread counts to measure, comma-separated (default 1,2)
  -r, --reps N         repetitions; the best is reported (default 5)
  --kernels NAME       kernel set to time (default: KILN_KERNELS or the best available)
  --quick              smaller buffers and fewer repetitions: a smoke test, not a measurement
  --sweep              also print batched GFLOP/s for 1..32 tokens (to tune the GEMM thresholds)
  --types LIST         weight types to time, comma-separated (default: all; e.g. q4_K,q6_K)
  --shapes LIST        matvec shapes ROWSxK, comma-separated (default 768x2048,2048x768,32000x768)
  --batch SHAPE:N      the batched table's weights ROWSxK and tokens (default 768x2048:128;
                       e.g. 5632x2048:512 for a 1.1B model's pp512 FFN product)
  --no-matvec          skip the matvec tables (the limits and the batched table still run)
  -h, --help           show this help
      --version        print the version, git commit, build and kernel sets
)";

struct Options {
    std::vector<int> threads{1, 2};
    int reps = 5;
    bool quick = false;
    bool sweep = false;
    std::string kernels;
    std::vector<DType> types;  // empty: all
    struct Shape {
        int64_t rows, k;
    };
    std::vector<Shape> shapes{{768, 2048}, {2048, 768}, {32000, 768}};
    Shape batch_shape{768, 2048};
    int64_t batch_tokens = 128;
    bool matvec = true;
};

// "q4_K,q6_K" -> types; a name kiln does not know is a usage error.
std::vector<DType> parse_types(std::string_view flag, std::string_view list) {
    std::vector<DType> types;
    for (std::string_view name : kiln::cli::split_list(list)) {
        const std::optional<DType> t = kiln::parse_dtype(name);
        if (!t) kiln::cli::usage_error("{}: unknown type '{}'", flag, name);
        types.push_back(*t);
    }
    return types;
}

// "5632x2048,2048x5632" -> shapes, each dimension 1..1,000,000.
std::vector<Options::Shape> parse_shapes(std::string_view flag, std::string_view list) {
    std::vector<Options::Shape> shapes;
    for (std::string_view item : kiln::cli::split_list(list)) {
        const size_t x = item.find('x');
        if (x == std::string_view::npos) kiln::cli::usage_error("{}: '{}' is not ROWSxK", flag, item);
        shapes.push_back({kiln::cli::parse_int(flag, item.substr(0, x), 1, 1'000'000),
                          kiln::cli::parse_int(flag, item.substr(x + 1), 1, 1'000'000)});
    }
    return shapes;
}

using kiln::bench::measure_bandwidth;
using kiln::bench::read_cpu_model;
using kiln::bench::read_l3_size;
double now() { return kiln::bench::now_seconds(); }

constexpr double kMiB = 1024.0 * 1024.0;

// xorshift64*: fast enough to fill hundreds of MiB of test weights.
struct Rng {
    uint64_t s;
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ull;
    }
    float uniform() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }  // [-1, 1)
};

// ------------------------------------------------------------------ limits

// FMA peak in GFLOP/s: 12 independent accumulator chains per thread cover
// FMA latency (4 cycles) times two FMA ports with room to spare: 12 chains of
// `iterations` FMAs each, with the widest vectors this CPU has (the bench is
// built for the x86-64 baseline, so the wide forms are compiled for their own
// instruction set alone and called only where the CPU has it). Returns a sum
// that keeps the work alive and sets *lanes to the vector width used.
#define KILN_FMA_CHAINS(V, fma, set)                                                                        \
    const V m = set(0.999999f), c = set(1e-7f);                                                             \
    V a0 = set(1), a1 = set(2), a2 = set(3), a3 = set(4), a4 = set(5), a5 = set(6);                         \
    V a6 = set(7), a7 = set(8), a8 = set(9), a9 = set(10), a10 = set(11), a11 = set(12);                    \
    for (int64_t i = 0; i < iterations; ++i) {                                                              \
        a0 = fma(a0, m, c), a1 = fma(a1, m, c), a2 = fma(a2, m, c), a3 = fma(a3, m, c);                     \
        a4 = fma(a4, m, c), a5 = fma(a5, m, c), a6 = fma(a6, m, c), a7 = fma(a7, m, c);                     \
        a8 = fma(a8, m, c), a9 = fma(a9, m, c), a10 = fma(a10, m, c), a11 = fma(a11, m, c);                 \
    }
#if defined(__x86_64__)
[[gnu::target("avx512f")]] float fma_chains_avx512(int64_t iterations) {
    KILN_FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps)
    alignas(64) float f[16];
    _mm512_store_ps(f, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                     _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                   _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)))));
    float total = 0;
    for (float v : f) total += v;
    return total;
}
[[gnu::target("avx2,fma")]] float fma_chains_avx2(int64_t iterations) {
    KILN_FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps)
    alignas(32) float f[8];
    _mm256_store_ps(f, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                     _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                                   _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)))));
    float total = 0;
    for (float v : f) total += v;
    return total;
}
#endif
float fma_chains_scalar(int64_t iterations) {
    const auto fma = [](float a, float b, float c) { return a * b + c; };
    const auto set = [](float v) { return v; };
    KILN_FMA_CHAINS(float, fma, set)
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
}
#undef KILN_FMA_CHAINS

float fma_chains(int64_t iterations, int* lanes) {
#if defined(__x86_64__)
    if (kiln::kernels::cpu_features().x86_64_v4) return *lanes = 16, fma_chains_avx512(iterations);
    if (kiln::kernels::cpu_features().x86_64_v3) return *lanes = 8, fma_chains_avx2(iterations);
#endif
    *lanes = 1;
    return fma_chains_scalar(iterations);
}

double measure_fma_peak(kiln::ThreadPool& pool, int reps, int64_t iterations) {
    double best = 0;
    std::vector<float> sinks(static_cast<size_t>(pool.size()) * 16);
    int lanes = 1;
    for (int rep = 0; rep < reps; ++rep) {
        const double t0 = now();
        pool.run([&](int ith, int) {
            int used = 1;
            sinks[static_cast<size_t>(ith) * 16] = fma_chains(iterations, &used);
            if (ith == 0) lanes = used;
        });
        const double seconds = now() - t0;
        const double flops_per_iteration = 12.0 * lanes * 2;
        best = std::max(best, flops_per_iteration * static_cast<double>(iterations) * pool.size() / seconds / 1e9);
    }
    volatile float keep = 0;
    for (float s : sinks) keep = keep + s;
    return best;
}

// ------------------------------------------------------------------ weights

// `copies` distinct copies of one random rows x k matrix of `type`, back to
// back. Copy c differs from copy 0 in one element per 4 KiB page (a one-ulp or
// one-code change), so no two pages are identical and nothing can share them.
struct Weights {
    DType type;
    int64_t rows, k;
    size_t row_bytes, matrix_bytes, copies;
    std::unique_ptr<std::byte[]> data;
};

// Weights as the engine's loader holds them for `set`: rearranged into the
// set's interleaved layout where it has one (quant/interleave.h), unless
// KILN_INTERLEAVE=0 (as for the engine).
Weights make_weights(const MatmulKernels& set, DType type, int64_t rows, int64_t k, size_t copies, uint64_t seed) {
    const auto& traits = kiln::type_traits(type);
    Weights w{type, rows, k, static_cast<size_t>(*kiln::checked_bytes(type, static_cast<uint64_t>(k))), 0, copies, {}};
    w.matrix_bytes = w.row_bytes * static_cast<size_t>(rows);
    w.data = std::make_unique_for_overwrite<std::byte[]>(w.matrix_bytes * copies);
    Rng rng{seed | 1};
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = rng.uniform();
        traits.from_float_ref(row.data(), w.data.get() + static_cast<size_t>(r) * w.row_bytes, k);
    }
    for (size_t c = 1; c < copies; ++c) {
        std::byte* dst = w.data.get() + c * w.matrix_bytes;
        std::memcpy(dst, w.data.get(), w.matrix_bytes);
        for (size_t page = 0; page < w.matrix_bytes; page += 4096) {
            size_t at = page + (c * 64) % 4096;
            if (at >= w.matrix_bytes) break;
            if (traits.quantized) {
                // Step to a code byte: bytes 0-1 of a block are its fp16 scale.
                const size_t in_block = at % traits.block_bytes;
                if (in_block < 2) at += 2 - in_block;
                if (at >= w.matrix_bytes) break;
            } else {
                at -= at % traits.block_bytes;  // the lowest (mantissa) byte of an element
            }
            dst[at] ^= std::byte{1};
        }
    }
    const char* env = std::getenv("KILN_INTERLEAVE");
    const bool keep_layout = env != nullptr && std::string_view(env) == "0";
    if (const auto layout = kiln::kernels::weight_layout(set, type, rows); layout && !keep_layout) {
        std::vector<std::byte> plain(w.matrix_bytes);
        for (size_t c = 0; c < copies; ++c) {
            std::byte* m = w.data.get() + c * w.matrix_bytes;
            std::memcpy(plain.data(), m, w.matrix_bytes);
            kiln::quant::interleave_rows(*layout, plain.data(), rows, k, m);
        }
        w.type = *layout;
    }
    return w;
}

// Activations for n_tokens tokens, prepared for `type` by the kernel set.
struct Activations {
    size_t stride;
    std::vector<std::byte> data;
};

Activations make_activations(const MatmulKernels& set, DType type, int64_t k, int64_t n_tokens, uint64_t seed) {
    Activations a{kiln::kernels::prepared_row_bytes(type, k), {}};
    a.data.resize(a.stride * static_cast<size_t>(n_tokens));
    Rng rng{seed | 1};
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (float& v : row) v = rng.uniform();
        set.prepare_row(type, row.data(), k, a.data.data() + static_cast<size_t>(t) * a.stride);
    }
    return a;
}

// Seconds for `iterations` matmuls, cycling through the first `copies` weight
// copies, split by rows over the pool; best of reps.
double time_matmul(kiln::ThreadPool& pool, const MatmulKernels& set, const Weights& w, size_t copies,
                   const Activations& x, int64_t n_tokens, std::vector<float>& out, int64_t iterations, int reps) {
    double best = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
        const double t0 = now();
        // Whole row tiles per thread, as the engine's matmul op hands them out.
        const int64_t tile = kiln::kernels::matmul_row_tile(w.type, n_tokens);
        pool.run([&](int ith, int nth) {
            const auto [g0, g1] = kiln::split_range((w.rows + tile - 1) / tile, ith, nth);
            const int64_t r0 = g0 * tile, r1 = std::min(w.rows, g1 * tile);
            for (int64_t it = 0; it < iterations; ++it) {
                const std::byte* weights = w.data.get() + static_cast<size_t>(it) % copies * w.matrix_bytes;
                set.matmul(w.type, w.k, weights, w.row_bytes, r0, r1, x.data.data(), x.stride, n_tokens, out.data(),
                           w.rows, nullptr);
                pool.barrier();
            }
        });
        best = std::min(best, now() - t0);
    }
    return best;
}

struct Limits {
    int threads;
    double bandwidth_gbs, fma_gflops;
};

int run(int argc, char** argv) {
    Options opt;
    kiln::cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view a = args.next();
        if (a == "-h" || a == "--help") {
            fmt::print("{}", kUsage);
            return 0;
        } else if (a == "--version") {
            kiln::cli::print_version("kiln-kernel-bench");
            return 0;
        } else if (a == "-t" || a == "--threads") {
            opt.threads.clear();
            for (int64_t t : kiln::cli::parse_int_list(a, args.value(a), 1, 256)) opt.threads.push_back(static_cast<int>(t));
        } else if (a == "-r" || a == "--reps") {
            opt.reps = static_cast<int>(kiln::cli::parse_int(a, args.value(a), 1, 1000));
        } else if (a == "--kernels") {
            opt.kernels = std::string(args.value(a));
        } else if (a == "--quick") {
            opt.quick = true;
        } else if (a == "--sweep") {
            opt.sweep = true;
        } else if (a == "--types") {
            opt.types = parse_types(a, args.value(a));
        } else if (a == "--shapes") {
            opt.shapes = parse_shapes(a, args.value(a));
        } else if (a == "--batch") {
            const std::string_view v = args.value(a);
            const size_t colon = v.find(':');
            if (colon == std::string_view::npos) kiln::cli::usage_error("--batch: expected ROWSxK:TOKENS, got '{}'", v);
            const std::vector<Options::Shape> shape = parse_shapes(a, v.substr(0, colon));
            if (shape.size() != 1) kiln::cli::usage_error("--batch: expected one ROWSxK shape, got '{}'", v);
            opt.batch_shape = shape.front();
            opt.batch_tokens = kiln::cli::parse_int(a, v.substr(colon + 1), 1, 65536);
        } else if (a == "--no-matvec") {
            opt.matvec = false;
        } else {
            kiln::cli::usage_error("unknown option '{}'", a);
        }
    }
    if (opt.quick) opt.reps = std::min(opt.reps, 2);
    const std::vector<DType> all_types{DType::F32,  DType::F16,  DType::Q8_0,   DType::Q4_0, DType::Q4_1, DType::IQ4_XS,
                                       DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q4_K, DType::Q6_K};
    const std::vector<DType>& matvec_types = opt.types.empty() ? all_types : opt.types;
    for (DType type : matvec_types) {
        if (!kiln::kernels::matmul_supports(type))
            kiln::cli::usage_error("--types: kiln does not multiply with {} weights", kiln::dtype_name(type));
        if (kiln::quant::is_interleaved(type))
            kiln::cli::usage_error("--types: {} is a layout, not a file type: name {} (the kernel set picks the layout)",
                                   kiln::dtype_name(type), kiln::dtype_name(kiln::quant::plain_type(type)));
        for (const Options::Shape& s : opt.shapes)
            if (!kiln::checked_bytes(type, static_cast<uint64_t>(s.k)))
                kiln::cli::usage_error("--shapes: k = {} is not a whole number of {} blocks", s.k, kiln::dtype_name(type));
        if (!kiln::checked_bytes(type, static_cast<uint64_t>(opt.batch_shape.k)))
            kiln::cli::usage_error("--batch: k = {} is not a whole number of {} blocks", opt.batch_shape.k,
                                   kiln::dtype_name(type));
    }

    const MatmulKernels* set = &kiln::kernels::active_matmul_kernels();
    std::string available;
    for (const MatmulKernels* s : kiln::kernels::available_matmul_kernels()) {
        if (!available.empty()) available += ", ";
        available += s->name;
        if (!opt.kernels.empty() && s->name == opt.kernels) set = s;
    }
    if (!opt.kernels.empty() && set->name != opt.kernels)
        kiln::cli::usage_error("--kernels {} is not available here (available: {})", opt.kernels, available);

    fmt::print("# kiln-kernel-bench\n\n");
    fmt::print("- CPU: {} ({} logical CPUs, L3 {})\n", read_cpu_model(), std::thread::hardware_concurrency(),
               read_l3_size());
    fmt::print("- kernel set: {} (available: {})\n", set->name, available);
    fmt::print("- best of {} repetitions{}\n\n", opt.reps, opt.quick ? "; --quick: smoke test, not a measurement" : "");

    // Limits, per thread count. The bandwidth buffer stays allocated so it can
    // be measured again next to each streaming measurement.
    const double streaming_set = (opt.quick ? 256 : 1024) * kMiB;
    const auto bw_words = static_cast<size_t>(streaming_set) / 8;
    auto bw_buffer = std::make_unique_for_overwrite<uint64_t[]>(bw_words);
    for (size_t i = 0; i < bw_words; ++i) bw_buffer[i] = i;  // touch every page before timing
    const int64_t fma_iterations = opt.quick ? 2'000'000 : 20'000'000;
    std::vector<Limits> limits;
    for (int nt : opt.threads) {
        kiln::ThreadPool pool(nt);
        limits.push_back({nt, measure_bandwidth(pool, bw_buffer.get(), bw_words, opt.reps),
                          measure_fma_peak(pool, opt.reps, fma_iterations)});
    }
    fmt::print("## Measured limits\n\n");
    fmt::print("| threads | memory read GB/s ({:.0f} MiB sum) | FMA peak GFLOP/s |\n", streaming_set / kMiB);
    fmt::print("|--:|--:|--:|\n");
    for (const Limits& l : limits) fmt::print("| {} | {:.1f} | {:.1f} |\n", l.threads, l.bandwidth_gbs, l.fma_gflops);

    // Matvec, hot and streaming.
    uint64_t seed = 1;
    if (opt.matvec) {
        const double target_bytes = opt.quick ? 0.2e9 : 2e9;  // bytes read per timed repetition
        fmt::print("\n## Matvec (decode: 1 token), GB/s of weights\n\n");
        fmt::print("hot: one matrix, cache-resident; streaming: {:.0f} MiB of copies. BW now: memory read GB/s measured\n"
                   "just before the streaming run; hot % is of the limits table's bandwidth.\n\n",
                   streaming_set / kMiB);
        fmt::print("| type | rows x k | MiB | threads | hot GB/s | hot % of BW | streaming GB/s | BW now |"
                   " streaming % of BW now |\n");
        fmt::print("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
        for (DType type : matvec_types) {
            for (const Options::Shape& s : opt.shapes) {
                const size_t matrix_bytes = *kiln::checked_bytes(type, static_cast<uint64_t>(s.rows * s.k));
                const auto copies = static_cast<size_t>(std::ceil(streaming_set / static_cast<double>(matrix_bytes)));
                const Weights w = make_weights(*set, type, s.rows, s.k, std::max<size_t>(copies, 2), seed++);
                const Activations x = make_activations(*set, type, s.k, 1, seed++);
                std::vector<float> out(static_cast<size_t>(s.rows));
                const auto hot_iters = std::max<int64_t>(4, static_cast<int64_t>(target_bytes / matrix_bytes));
                const auto stream_iters = std::max<int64_t>(static_cast<int64_t>(w.copies), hot_iters);
                for (const Limits& l : limits) {
                    kiln::ThreadPool pool(l.threads);
                    time_matmul(pool, *set, w, 1, x, 1, out, std::min<int64_t>(hot_iters, 8), 1);  // warm up
                    const double hot_s = time_matmul(pool, *set, w, 1, x, 1, out, hot_iters, opt.reps);
                    const double bw_now = measure_bandwidth(pool, bw_buffer.get(), bw_words, std::min(opt.reps, 3));
                    const double stream_s = time_matmul(pool, *set, w, w.copies, x, 1, out, stream_iters, opt.reps);
                    const double hot_gbs = static_cast<double>(matrix_bytes) * static_cast<double>(hot_iters) / hot_s / 1e9;
                    const double stream_gbs =
                        static_cast<double>(matrix_bytes) * static_cast<double>(stream_iters) / stream_s / 1e9;
                    fmt::print("| {} | {}x{} | {:.1f} | {} | {:.1f} | {:.0f}% | {:.1f} | {:.1f} | {:.0f}% |\n",
                               kiln::dtype_name(w.type), s.rows, s.k, static_cast<double>(matrix_bytes) / kMiB, l.threads,
                               hot_gbs, 100.0 * hot_gbs / l.bandwidth_gbs, stream_gbs, bw_now, 100.0 * stream_gbs / bw_now);
                }
            }
        }
    }

    // Batched matmul: prompt processing.
    const std::vector<DType>& batch_types = matvec_types;
    const int64_t kTokens = opt.batch_tokens;
    const int64_t batch_rows = opt.batch_shape.rows, batch_k = opt.batch_shape.k;
    fmt::print("\n## Batched matmul ({} tokens, {}x{} weights)\n\n", kTokens, batch_rows, batch_k);
    fmt::print("FMA peak now: measured just before each row. For q8_0/q4_0, GFLOP/s counts the same 2 rows k tokens\n"
               "operations done as int8 products, so it can exceed the float FMA peak.\n\n");
    fmt::print("| type | threads | GFLOP/s | FMA peak now | % of FMA peak |\n|---|--:|--:|--:|--:|\n");
    for (DType type : batch_types) {
        const Weights w = make_weights(*set, type, batch_rows, batch_k, 1, seed++);
        const Activations x = make_activations(*set, type, batch_k, kTokens, seed++);
        std::vector<float> out(static_cast<size_t>(batch_rows * kTokens));
        const double flops = 2.0 * static_cast<double>(batch_rows * batch_k * kTokens);
        const int64_t iters = std::max<int64_t>(2, static_cast<int64_t>((opt.quick ? 0.3e9 : 4e9) / flops));
        for (const Limits& l : limits) {
            kiln::ThreadPool pool(l.threads);
            time_matmul(pool, *set, w, 1, x, kTokens, out, 2, 1);  // warm up: scratch buffers, caches
            const double peak_now = measure_fma_peak(pool, std::min(opt.reps, 3), fma_iterations);
            const double seconds = time_matmul(pool, *set, w, 1, x, kTokens, out, iters, opt.reps);
            const double gflops = flops * static_cast<double>(iters) / seconds / 1e9;
            fmt::print("| {} | {} | {:.1f} | {:.1f} | {:.0f}% |\n", kiln::dtype_name(w.type), l.threads, gflops,
                       peak_now, 100.0 * gflops / peak_now);
        }
    }

    if (opt.sweep) {
        fmt::print("\n## Tokens sweep (768x2048, {} thread), GFLOP/s\n\n| tokens |", opt.threads.front());
        for (DType type : batch_types) fmt::print(" {} |", kiln::dtype_name(type));
        fmt::print("\n|--:|");
        for (size_t i = 0; i < batch_types.size(); ++i) fmt::print("--:|");
        fmt::print("\n");
        kiln::ThreadPool pool(opt.threads.front());
        std::vector<Weights> ws;
        for (DType type : batch_types) ws.push_back(make_weights(*set, type, 768, 2048, 1, seed++));
        std::vector<float> out(static_cast<size_t>(768 * 32));
        for (int64_t n = 1; n <= 32; ++n) {
            fmt::print("| {} |", n);
            for (const Weights& w : ws) {
                const Activations x = make_activations(*set, w.type, 2048, n, seed++);
                const int64_t iters = std::max<int64_t>(4, 400 / n);
                time_matmul(pool, *set, w, 1, x, n, out, 2, 1);
                const double seconds = time_matmul(pool, *set, w, 1, x, n, out, iters, opt.reps);
                fmt::print(" {:.1f} |", 2.0 * 768 * 2048 * static_cast<double>(n * iters) / seconds / 1e9);
            }
            fmt::print("\n");
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run_tool("kiln-kernel-bench", [&] { return run(argc, argv); }); }
