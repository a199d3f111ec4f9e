// kiln-attention-bench: the cached-attention op alone, as a model's layer runs
// it: one step of T query tokens after D tokens already in the cache, with
// TinyLlama's heads by default (32 query heads sharing 4 key/value heads of
// 64). It times the graph op through the executor (so a decode step's split
// over threads is included) and reports per step:
//   * microseconds (best of -r runs, after one warm-up),
//   * GFLOP/s: 4 · head_dim FLOPs per (query head, key) pair it reads
//     (q·k and the weighted value sum),
//   * GB/s: the cache bytes the step reads (every key and value row of each
//     key/value head once), what bounds a decode step at depth.
// The caches are 2 GiB of rows at most; rows are random, written before timing.
// With --layers N the step runs N attention nodes, each over its own cache, as
// a model's layers do: together they outgrow the last-level cache, so the rows
// come from DRAM as in a real decode step; the figures are then per layer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "engine/core/dtype.h"
#include "engine/graph/executor.h"
#include "engine/ops/ops.h"
#include "engine/runtime/thread_pool.h"
#include "tools/common/cli.h"

namespace {

struct Options {
    std::vector<int> threads{1, 2};
    std::vector<int64_t> depths{512, 4096};
    std::vector<int64_t> tokens{1};
    std::vector<kiln::DType> types{kiln::DType::F16};
    int64_t heads = 32, kv_heads = 4, head_dim = 64;
    int64_t layers = 1;
    int reps = 5;
};

constexpr const char* kUsage = R"(usage: kiln-attention-bench [options]

Times one cached-attention step (T query tokens after D cached tokens).

options:
  -t, --threads LIST     thread counts (default 1,2)
  -d, --depth LIST       tokens already in the cache (default 512,4096)
  -p, --tokens LIST      query tokens per step, causal among themselves (default 1: a decode step)
  -ct, --cache-type LIST cache types for keys and values: f32, f16, bf16, q8_0, q4_0 (default f16)
  --heads N              query heads (default 32)
  --kv-heads N           key/value heads (default 4)
  --head-dim N           head size (default 64)
  --layers N             attention nodes per step, each with its own cache (default 1;
                         TinyLlama has 22): figures per layer
  -r, --reps N           timed runs, best reported (default 5)
  -h, --help             show this help
)";

std::vector<kiln::DType> cache_types(std::string_view flag, std::string_view list) {
    std::vector<kiln::DType> types;
    for (std::string_view item : kiln::cli::split_list(list)) {
        const std::optional<kiln::DType> type = kiln::parse_dtype(item);
        if (!type || !kiln::kv_cache_type_supported(*type))
            kiln::cli::usage_error("{} must be {}, got '{}'", flag, kiln::cli::CacheTypeFlags::kNames, item);
        types.push_back(*type);
    }
    return types;
}

struct Result {
    double best_seconds;
    double flops, bytes;
};

Result time_step(const Options& o, kiln::DType type, int64_t depth, int64_t tokens, int threads) {
    using namespace kiln;
    const int64_t width = o.kv_heads * o.head_dim, rows = depth + tokens;
    const size_t cache_bytes = *checked_bytes(type, static_cast<uint64_t>(width * rows));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> floats(static_cast<size_t>(width * rows));
    if (cache_bytes > (size_t{1} << 31) / static_cast<size_t>(o.layers))
        cli::usage_error("depth {} with {} layers makes caches over 2 GiB", depth, o.layers);
    const TypeTraits& tt = type_traits(type);
    std::vector<std::vector<std::byte>> caches(static_cast<size_t>(2 * o.layers));  // keys, values of each layer
    for (auto& cache : caches) {
        cache.resize(cache_bytes);
        for (float& x : floats) x = normal(rng);
        tt.from_float_ref(floats.data(), cache.data(), width * rows);
    }
    Graph g;
    const NodeId q = g.input("q", DType::F32, Shape::of({o.heads * o.head_dim, tokens}));
    const NodeId pos = g.input("pos", DType::I32, Shape::of({tokens}));
    for (int64_t l = 0; l < o.layers; ++l) {
        const NodeId kc = g.state(fmt::format("k{}", l), type, Shape::of({width, rows}), caches[2 * l].data());
        const NodeId vc = g.state(fmt::format("v{}", l), type, Shape::of({width, rows}), caches[2 * l + 1].data());
        g.mark_output(ops::cached_attention(g, q, kc, vc, pos, kNoNode, o.heads, o.kv_heads, o.head_dim,
                                            {1.0f / std::sqrt(static_cast<float>(o.head_dim)), 0.0f, 0}));
    }
    for (int64_t i = 0; i < o.heads * o.head_dim * tokens; ++i) g.node(q).row(0)[i] = normal(rng);
    int64_t pairs = 0;  // (query token, key) pairs per query head
    for (int64_t t = 0; t < tokens; ++t) {
        g.node(pos).row<int32_t>(0)[t] = static_cast<int32_t>(depth + t);
        pairs += depth + t + 1;
    }
    ThreadPool pool(threads);
    Executor exec(g);
    exec.run(pool);  // warm-up
    double best = 1e30;
    for (int r = 0; r < o.reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        exec.run(pool);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    best /= static_cast<double>(o.layers);
    return {best, 4.0 * static_cast<double>(pairs * o.heads * o.head_dim), 2.0 * static_cast<double>(cache_bytes)};
}

int run(int argc, char** argv) {
    Options o;
    kiln::cli::Args args(argc, argv);
    while (!args.done()) {
        const std::string_view a = args.next();
        if (a == "-h" || a == "--help") {
            fmt::print("{}", kUsage);
            return 0;
        } else if (a == "-t" || a == "--threads") {
            o.threads.clear();
            for (int64_t t : kiln::cli::parse_int_list(a, args.value(a), 1, 4096)) o.threads.push_back(static_cast<int>(t));
        } else if (a == "-d" || a == "--depth") {
            o.depths = kiln::cli::parse_int_list(a, args.value(a), 1);
        } else if (a == "-p" || a == "--tokens") {
            o.tokens = kiln::cli::parse_int_list(a, args.value(a), 1);
        } else if (a == "-ct" || a == "--cache-type") {
            o.types = cache_types(a, args.value(a));
        } else if (a == "--heads") {
            o.heads = kiln::cli::parse_int(a, args.value(a), 1);
        } else if (a == "--kv-heads") {
            o.kv_heads = kiln::cli::parse_int(a, args.value(a), 1);
        } else if (a == "--head-dim") {
            o.head_dim = kiln::cli::parse_int(a, args.value(a), 1);
        } else if (a == "--layers") {
            o.layers = kiln::cli::parse_int(a, args.value(a), 1, 4096);
        } else if (a == "-r" || a == "--reps") {
            o.reps = static_cast<int>(kiln::cli::parse_int(a, args.value(a), 1));
        } else {
            kiln::cli::usage_error("unknown option '{}'", a);
        }
    }
    if (o.heads % o.kv_heads != 0) kiln::cli::usage_error("--heads {} is not a multiple of --kv-heads {}", o.heads, o.kv_heads);
    fmt::print("heads {}/{} of {}; {} layer{}; best of {} runs\n\n", o.heads, o.kv_heads, o.head_dim, o.layers,
               o.layers == 1 ? "" : "s", o.reps);
    fmt::print("| cache | threads | depth | tokens | us/{} | GFLOP/s | cache GB/s |\n", o.layers == 1 ? "step" : "layer");
    fmt::print("|---|--:|--:|--:|--:|--:|--:|\n");
    for (kiln::DType type : o.types)
        for (int64_t depth : o.depths)
            for (int64_t tokens : o.tokens)
                for (int threads : o.threads) {
                    const Result r = time_step(o, type, depth, tokens, threads);
                    fmt::print("| {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} |\n", kiln::dtype_name(type), threads, depth,
                               tokens, r.best_seconds * 1e6, r.flops / r.best_seconds * 1e-9,
                               r.bytes / r.best_seconds * 1e-9);
                }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-attention-bench", [&] { return run(argc, argv); });
}
