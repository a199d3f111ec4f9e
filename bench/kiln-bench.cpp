// kiln-bench: tokens per second of prompt processing and generation, measured
// and reported the way llama.cpp's llama-bench does, so the two can be run on
// the same GGUF file and compared figure for figure.
//
// For every model x threads x test:
//  * pp N: the cache cleared, N random token ids evaluated as one batch (only
//    the last position's logits computed, as llama-bench asks llama.cpp);
//  * tg N: the cache cleared, N steps of one token each (random ids, so no
//    sampling in the timed loop);
//  * pg P,N (-pg, llama-bench's): a P-token prompt and then N steps, timed
//    together, t/s over P + N tokens;
//  * gp P,N (-gp, ik_llama.cpp's): N steps after an untimed P-token prompt,
//    t/s over the N generated tokens: generation at depth, where reading the
//    KV cache adds to reading the weights.
// -d D (newer llama-bench's --n-depth) runs every test after D untimed
// tokens. Prompts go in batches of -b tokens (default 2048, as llama-bench).
// One untimed run of each test first (graph compiled, pages faulted in, the
// caches and the thread pool warm), then -r timed repetitions. t/s is the
// mean over repetitions of tokens / seconds, ± their sample standard
// deviation, exactly llama-bench's avg_ts and stddev_ts.
//
// For tg it also reports the weight bandwidth a decode step draws: the bytes of
// every tensor one step reads (all of them except the token embedding, of
// which one row is read — unless the output head is tied to it) times tokens
// per second; with --roofline, also as a fraction of this machine's read
// bandwidth measured with the same threads just before the test
// (bench/machine_limits.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/compute_peaks.h"
#include "bench/machine_limits.h"
#include "engine/core/error.h"
#include "engine/kernels/matmul.h"
#include "engine/models/architectures.h"
#include "engine/models/decoder_lm.h"
#include "engine/models/llama.h"
#include "engine/quant/file_type.h"
#include "engine/runtime/cpu_budget.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"
#include "tools/common/batch_flags.h"
#include "tools/common/check_tensors.h"
#include "tools/common/cli.h"
#include "tools/common/gpu_flags.h"
#include "tools/common/version.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln-bench [options]

Measures prompt processing (pp) and generation (tg) speed in tokens/s, like
llama.cpp's llama-bench, with the same flags and output field names.

options:
  -m, --model FILE[,FILE...]   GGUF model(s); the flag may be repeated
  -t, --threads LIST           thread counts, comma-separated (default: usable physical
                               performance cores)
      --check-tensors          check every tensor's data first (NaN/inf values or
                               block scales), as llama.cpp's --check-tensors
  -p, --n-prompt LIST          prompt lengths, comma-separated; 0 = no pp test (default 512)
  -n, --n-gen LIST             generated tokens, comma-separated; 0 = no tg test (default 128)
  -pg PP,TG                    a PP-token prompt then TG generated tokens, timed together (llama-bench);
                               may repeat
  -gp PP,TG                    TG tokens generated after an untimed PP-token prompt (ik_llama.cpp);
                               may repeat
  -d, --n-depth LIST           run each test after this many untimed tokens in the cache (default 0)
  -b, --batch-size LIST        logical batch sizes (default 2048)
  -ub, --ubatch-size LIST      physical batch sizes (default 512): prompts are evaluated in pieces
                               of min(b, ub) tokens; every b with every ub is a test
  -mmp, --mmap 0|1             1 (default): compute from the file mapping, as kiln does; 0: every
                               weight read into huge pages first, kiln's --no-mmap (reported as use_mmap)
  -fa, --flash-attn 0|1        accepted; kiln has one attention kernel (reported as flash_attn 0)
  -ngl, -mg, -sm, -ts LIST     llama-bench's GPU flags: accepted and ignored with a note (CPU only)
  -r, --repetitions N          timed repetitions of each test (default 5)
  -o, --output FORMAT          md, csv, json, jsonl or sql (SQLite statements, as llama-bench; default md)
  -ctk, --cache-type-k LIST    types of the cached keys, comma-separated: f32, f16, bf16, q8_0,
                               q4_0 (default f16); every -ctk/-ctv pair is measured
  -ctv, --cache-type-v LIST    types of the cached values, the same choices (default f16)
      --roofline               measure this machine's memory read bandwidth (just before
                               each tg test, with its threads) and report tg's weight
                               bandwidth as a fraction of it
      --roofline-mib N         size of the buffer --roofline reads (default 1024: well
                               past the L3, so the figure is DRAM bandwidth)
      --compute-roofline       measure this machine's multiply-add peaks (fp32 FMA, int8,
                               AMX where present; once per thread count) and report pp's
                               matrix multiply-adds per second as a fraction of the peak
                               of the kernels in use
  -h, --help                   show this help
      --version                print the version, git commit, build and kernel sets

The kernel set is the best this CPU runs, or the one named by KILN_KERNELS.
)";

enum class Format { Markdown, Csv, Json, Jsonl, Sql };

// What one test times: n_prompt prompt tokens (in batches) then n_gen single
// steps, after n_depth untimed tokens. `name` is how llama-bench (pp, tg, pg,
// -d) or ik_llama.cpp (gp) call it.
struct Test {
    int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
    std::string name;
};

struct Options {
    std::vector<std::string> models;
    std::vector<int> threads;
    bool check_tensors = false;
    std::vector<int64_t> n_prompt{512};
    std::vector<int64_t> n_gen{128};
    std::vector<std::pair<int64_t, int64_t>> pg, gp;
    std::vector<int64_t> n_depth{0};
    std::vector<int64_t> batch{kiln::cli::BatchFlags::kDefaultBatch};
    std::vector<int64_t> ubatch{kiln::cli::BatchFlags::kDefaultUbatch};
    bool mmap = true;
    int reps = 5;
    Format format = Format::Markdown;
    bool roofline = false;
    int64_t roofline_mib = 1024;
    bool compute_roofline = false;
    std::vector<kiln::DType> type_k{kiln::cli::CacheTypeFlags::kDefault};
    std::vector<kiln::DType> type_v{kiln::cli::CacheTypeFlags::kDefault};
};

using kiln::cli::parse_int_list;
using kiln::cli::split_list;

std::pair<int64_t, int64_t> parse_pair(std::string_view flag, std::string_view text) {
    const std::vector<std::string_view> items = split_list(text);
    if (items.size() != 2) kiln::cli::usage_error("{} takes PP,TG (two numbers), got '{}'", flag, text);
    return {kiln::cli::parse_int(flag, items[0], 1, 1 << 20), kiln::cli::parse_int(flag, items[1], 1, 1 << 20)};
}

// A llama-bench flag that takes a list of 0/1 values; kiln takes one.
bool parse_switch(std::string_view flag, std::string_view text) {
    const std::vector<int64_t> values = parse_int_list(flag, text, 0, 1);
    if (values.size() != 1) kiln::cli::usage_error("{} takes one value in kiln-bench (0 or 1), got '{}'", flag, text);
    return values[0] == 1;
}

Options parse(int argc, char** argv) {
    using namespace kiln::cli;
    Options o;
    Args args(argc, argv);
    bool threads_given = false;
    GpuFlags gpu;
    // As llama-bench, a list flag given twice adds to its list (-n 0 -n 16 is
    // 0,16); the first use replaces the default.
    std::vector<std::string_view> given;
    auto append = [&](std::vector<int64_t>& list, std::string_view name, const std::vector<int64_t>& values) {
        if (std::ranges::find(given, name) == given.end()) {
            list.clear();
            given.push_back(name);
        }
        list.insert(list.end(), values.begin(), values.end());
    };
    while (!args.done()) {
        const std::string_view flag = args.next();
        if (flag == "-h" || flag == "--help") {
            fmt::print("{}", kUsage);
            std::exit(0);
        } else if (flag == "--version") {
            kiln::cli::print_version("kiln-bench");
            std::exit(0);
        } else if (flag == "-m" || flag == "--model") {
            for (std::string_view m : split_list(args.value(flag))) {
                if (m.empty()) usage_error("{} got an empty file name", flag);
                o.models.emplace_back(m);
            }
        } else if (flag == "--check-tensors") {
            o.check_tensors = true;
        } else if (flag == "-t" || flag == "--threads") {
            if (!threads_given) o.threads.clear();
            for (int64_t t : parse_int_list(flag, args.value(flag), 1, 1024)) o.threads.push_back(static_cast<int>(t));
            threads_given = true;
        } else if (flag == "-p" || flag == "--n-prompt") {
            append(o.n_prompt, "-p", parse_int_list(flag, args.value(flag), 0, 1 << 20));
        } else if (flag == "-n" || flag == "--n-gen") {
            append(o.n_gen, "-n", parse_int_list(flag, args.value(flag), 0, 1 << 20));
        } else if (flag == "-r" || flag == "--repetitions") {
            o.reps = static_cast<int>(parse_int(flag, args.value(flag), 1, 10000));
        } else if (flag == "-o" || flag == "--output") {
            const std::string_view f = args.value(flag);
            if (f == "md") o.format = Format::Markdown;
            else if (f == "csv") o.format = Format::Csv;
            else if (f == "json") o.format = Format::Json;
            else if (f == "jsonl") o.format = Format::Jsonl;
            else if (f == "sql") o.format = Format::Sql;
            else usage_error("{} must be md, csv, json, jsonl or sql, got '{}'", flag, f);
        } else if (flag == "-pg") {
            o.pg.push_back(parse_pair(flag, args.value(flag)));
        } else if (flag == "-gp") {
            o.gp.push_back(parse_pair(flag, args.value(flag)));
        } else if (flag == "-d" || flag == "--n-depth") {
            append(o.n_depth, "-d", parse_int_list(flag, args.value(flag), 0, 1 << 20));
        } else if (flag == "-b" || flag == "--batch-size") {
            append(o.batch, "-b", parse_int_list(flag, args.value(flag), 1, 1 << 20));
        } else if (flag == "-ub" || flag == "--ubatch-size") {
            append(o.ubatch, "-ub", parse_int_list(flag, args.value(flag), 1, 1 << 20));
        } else if (flag == "-mmp" || flag == "--mmap") {
            o.mmap = parse_switch(flag, args.value(flag));
        } else if (flag == "-fa" || flag == "--flash-attn") {
            if (parse_switch(flag, args.value(flag)))
                fmt::print(stderr, "kiln-bench: note: -fa 1 has no effect; kiln has one attention kernel\n");
        } else if (gpu.parse(flag, args, /*lists=*/true)) {
        } else if (flag == "-ctk" || flag == "--cache-type-k" || flag == "-ctv" || flag == "--cache-type-v") {
            std::vector<kiln::DType> types;
            for (std::string_view name : split_list(args.value(flag))) {
                const std::optional<kiln::DType> type = kiln::parse_dtype(name);
                if (!type || !kiln::kv_cache_type_supported(*type))
                    usage_error("{} must list {}, got '{}'", flag, CacheTypeFlags::kNames, name);
                types.push_back(*type);
            }
            (flag == "-ctk" || flag == "--cache-type-k" ? o.type_k : o.type_v) = types;
        } else if (flag == "--roofline") {
            o.roofline = true;
        } else if (flag == "--compute-roofline") {
            o.compute_roofline = true;
        } else if (flag == "--roofline-mib") {
            o.roofline_mib = parse_int(flag, args.value(flag), 1, 1 << 20);
        } else {
            usage_error("unknown argument '{}'", flag);
        }
    }
    if (o.models.empty()) usage_error("a model is required (-m MODEL)");
    if (!threads_given) o.threads = {kiln::default_thread_count()};
    gpu.note("kiln-bench");
    std::erase(o.n_prompt, 0);
    std::erase(o.n_gen, 0);
    if (o.n_prompt.empty() && o.n_gen.empty() && o.pg.empty() && o.gp.empty())
        usage_error("nothing to measure: -p and -n are both 0 and there is no -pg or -gp");
    return o;
}

// ------------------------------------------------------------------ a model

struct ModelInfo {
    std::string filename;
    std::string type;        // llama-bench's model_type: "llama 1B Q4_K - Medium"
    uint64_t size = 0;       // bytes of all tensors
    uint64_t n_params = 0;
    uint64_t step_bytes = 0;  // weight bytes one decode step reads
    uint64_t token_macs = 0;  // matrix multiply-adds per token (attention's left out)
    std::string weight_family = "fp32";  // "int8" when the matrices are block-quantized
    bool use_mmap = true;     // computed from the file mapping (-mmp 1), not every weight copied (-mmp 0)
};

// llama.cpp's size class of a Llama model (llm_type_name of the type its
// load_hparams picks from the layer count), "?B" for shapes it does not name.
std::string llama_size_class(const kiln::arch::LlamaParams& c, uint32_t n_expert) {
    if (n_expert == 8) return c.n_layers == 32 ? "8x7B" : c.n_layers == 56 ? "8x22B" : "?B";
    switch (c.n_layers) {
        case 16:
        case 22: return "1B";
        case 26:
        case 28: return "3B";
        case 32: return c.n_vocab == 49152 ? "3B" : c.n_vocab < 40000 ? "7B" : "8B";
        case 36: return "8B";
        case 40: return "13B";
        case 48: return "34B";
        case 60: return "30B";
        case 80: return c.n_heads == c.n_kv_heads ? "65B" : "70B";
        default: return "?B";
    }
}

// llama-bench's model_type: "llama 1B Q4_K - Medium" (architecture, size class,
// file type name; " (guessed)" when the file has no general.file_type). Size
// classes are named for llama only; other architectures get "?B".
std::string model_type(const kiln::DecoderLm& model) {
    const kiln::GgufFile& file = model.file();
    std::vector<kiln::DType> types;
    for (const kiln::GgufTensor& t : file.tensors()) types.push_back(t.type);
    auto number = [&](std::string_view key) -> std::optional<int64_t> {
        const kiln::GgufValue* v = file.find(key);
        return v ? v->as_int() : std::nullopt;
    };
    const std::string& arch = model.arch().name();
    std::string size_class = "?B";
    if (arch == kiln::arch::kLlama) {
        const std::optional<int64_t> experts = number(fmt::format("{}.expert_count", arch));
        size_class = llama_size_class(kiln::llama_params(model.arch()), experts ? static_cast<uint32_t>(*experts) : 0);
    }
    const std::optional<int64_t> file_type = number("general.file_type");
    return fmt::format("{} {} {}", arch, size_class,
                       kiln::describe_file_type(file_type ? std::optional(static_cast<uint32_t>(*file_type)) : std::nullopt,
                                                types));
}

// The weight bytes one decode step reads: every matrix, but of an embedding
// table only one row (unless the head is tied to it and reads it all).
uint64_t decode_step_bytes(const kiln::DecoderLm& model) {
    const kiln::GgufFile& file = model.file();
    const std::vector<kiln::arch::TensorSpec> specs = model.arch().tensor_specs();
    bool tied = false;  // an optional matrix absent: the head is the first table
    for (const kiln::arch::TensorSpec& s : specs)
        if (s.role == kiln::arch::TensorRole::Matrix && s.optional && file.find_tensor(s.name) == nullptr) tied = true;
    uint64_t bytes = model.info().weight_bytes;
    bool first_table = true;
    for (const kiln::arch::TensorSpec& s : specs) {
        if (s.role != kiln::arch::TensorRole::Table) continue;
        const kiln::GgufTensor* t = file.find_tensor(s.name);
        const bool whole = tied && first_table;
        first_table = false;
        if (t == nullptr || whole) continue;
        bytes = bytes - t->data.size() + t->data.size() / t->dims[1];
    }
    return bytes;
}

// The multiply-adds of one token's matrix products: every matrix's elements
// (a tied head multiplies with the embedding table). Attention's products
// grow with the context and are left out: at pp512 on a 1.1B Llama they are
// about 2% of the matrices'.
uint64_t token_matrix_macs(const kiln::DecoderLm& model) {
    const kiln::GgufFile& file = model.file();
    const std::vector<kiln::arch::TensorSpec> specs = model.arch().tensor_specs();
    bool tied = false;
    for (const kiln::arch::TensorSpec& s : specs)
        if (s.role == kiln::arch::TensorRole::Matrix && s.optional && file.find_tensor(s.name) == nullptr) tied = true;
    uint64_t macs = 0;
    bool first_table = true;
    for (const kiln::arch::TensorSpec& s : specs) {
        const bool head = s.role == kiln::arch::TensorRole::Table && tied && first_table;
        if (s.role == kiln::arch::TensorRole::Table) first_table = false;
        if (s.role != kiln::arch::TensorRole::Matrix && !head) continue;
        if (const kiln::GgufTensor* t = file.find_tensor(s.name); t != nullptr && t->dims.size() >= 2)
            macs += t->dims[0] * t->dims[1];
    }
    return macs;
}

// Which products a file's matrices take: int8 (block-quantized types) or fp32.
std::string weight_family(const kiln::DecoderLm& model) {
    const kiln::GgufFile& file = model.file();
    for (const kiln::arch::TensorSpec& s : model.arch().tensor_specs()) {
        if (s.role != kiln::arch::TensorRole::Matrix) continue;
        if (const kiln::GgufTensor* t = file.find_tensor(s.name); t != nullptr)
            return t->type == kiln::DType::F32 || t->type == kiln::DType::F16 || t->type == kiln::DType::BF16 ? "fp32"
                                                                                                              : "int8";
    }
    return "fp32";
}

ModelInfo describe(const std::string& path, const kiln::DecoderLm& model) {
    ModelInfo m;
    m.filename = path;
    m.size = model.info().weight_bytes;
    m.n_params = model.info().parameters;
    m.type = model_type(model);
    m.step_bytes = decode_step_bytes(model);
    m.token_macs = token_matrix_macs(model);
    m.weight_family = weight_family(model);
    return m;
}

// ------------------------------------------------------------------ timing

struct Result {
    const ModelInfo* model;
    int threads;
    Test test;
    std::string test_time;  // ISO 8601, UTC, when the test started
    std::vector<double> samples_ns;
    std::optional<double> roofline_gbs;  // measured read bandwidth at these threads
    std::string type_k = "f16", type_v = "f16";  // the KV cache's types
    int64_t batch = 2048, ubatch = 512;
    std::optional<double> peak_macs = std::nullopt;  // measured multiply-add peak of the kernels in use (pp tests)

    int64_t tokens() const { return test.n_prompt + test.n_gen; }
    std::vector<double> samples_ts() const {
        std::vector<double> ts;
        for (double ns : samples_ns) ts.push_back(1e9 * static_cast<double>(tokens()) / ns);
        return ts;
    }
    static double mean(const std::vector<double>& v) {
        return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    }
    // Sample standard deviation (n - 1), 0 for a single sample, as llama-bench.
    static double stddev(const std::vector<double>& v) {
        if (v.size() < 2) return 0.0;
        const double m = mean(v);
        double sq = 0;
        for (double x : v) sq += (x - m) * (x - m);
        return std::sqrt(sq / static_cast<double>(v.size() - 1));
    }
    double avg_ts() const { return mean(samples_ts()); }
    double stddev_ts() const { return stddev(samples_ts()); }
    const std::string& test_name() const { return test.name; }
    // Weight bytes per second during generation; nullopt for pp.
    std::optional<double> bandwidth_gbs() const {
        if (test.n_gen == 0 || test.n_prompt > 0) return std::nullopt;
        return static_cast<double>(model->step_bytes) * avg_ts() / 1e9;
    }
    // Matrix multiply-adds per second of a prompt test.
    std::optional<double> macs_per_second() const {
        if (test.n_prompt == 0 || test.n_gen > 0) return std::nullopt;
        return static_cast<double>(model->token_macs) * avg_ts();
    }
};

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int64_t n_vocab) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = pick(rng);
    return tokens;
}


// Seconds of one run of a test from an empty cache: the depth untimed, then
// the prompt and the generation steps timed. The ids are drawn before the
// clock starts.
double run_once(kiln::CausalSession& ctx, kiln::ThreadPool& pool, std::mt19937& rng, const Test& t, int64_t batch,
                int64_t n_vocab) {
    const std::vector<int32_t> tokens = random_tokens(rng, t.n_depth + t.n_prompt + t.n_gen, n_vocab);
    const std::span<const int32_t> all(tokens);
    ctx.reset();
    ctx.eval_in_pieces(all.first(static_cast<size_t>(t.n_depth)), batch, pool);
    const double t0 = kiln::bench::now_seconds();
    ctx.eval_in_pieces(all.subspan(static_cast<size_t>(t.n_depth), static_cast<size_t>(t.n_prompt)), batch, pool);
    for (int64_t i = 0; i < t.n_gen; ++i) ctx.eval(all.subspan(static_cast<size_t>(t.n_depth + t.n_prompt + i), 1), pool);
    return kiln::bench::now_seconds() - t0;
}

// ------------------------------------------------------------------ output

std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
    return out;
}

enum class Kind { String, Int, Float, Bool };
struct Field {
    std::string name;
    Kind kind;
    std::string value;  // as text; empty Float = null (not measured)
};

// llama-bench's fields in its order (so column-indexing scripts work too), with
// the values that describe kiln's run, then kiln's own.
std::vector<Field> fields_of(const Result& r, std::string_view cpu, std::string_view kernels) {
    const double avg_ns = Result::mean(r.samples_ns);
    const auto opt = [](std::optional<double> v, int digits) {
        return v ? fmt::format("{:.{}f}", *v, digits) : std::string();
    };
    std::optional<double> fraction;
    if (r.roofline_gbs && r.bandwidth_gbs()) fraction = *r.bandwidth_gbs() / *r.roofline_gbs;
    std::optional<double> compute_fraction;
    if (r.peak_macs && r.macs_per_second()) compute_fraction = *r.macs_per_second() / *r.peak_macs;
    const int64_t batch = r.batch, ubatch = r.ubatch;
    return {
        {"build_commit", Kind::String, std::string(kiln::cli::build_commit())},
        {"build_number", Kind::Int, "0"},
        {"cpu_info", Kind::String, std::string(cpu)},
        {"gpu_info", Kind::String, ""},
        {"backends", Kind::String, "CPU"},
        {"model_filename", Kind::String, r.model->filename},
        {"model_type", Kind::String, r.model->type},
        {"model_size", Kind::Int, std::to_string(r.model->size)},
        {"model_n_params", Kind::Int, std::to_string(r.model->n_params)},
        {"n_batch", Kind::Int, std::to_string(batch)},
        {"n_ubatch", Kind::Int, std::to_string(ubatch)},
        {"n_threads", Kind::Int, std::to_string(r.threads)},
        {"cpu_mask", Kind::String, "0x0"},
        {"cpu_strict", Kind::Bool, "0"},
        {"poll", Kind::Int, "100"},
        {"type_k", Kind::String, r.type_k},
        {"type_v", Kind::String, r.type_v},
        {"n_gpu_layers", Kind::Int, "0"},
        {"split_mode", Kind::String, "none"},
        {"main_gpu", Kind::Int, "0"},
        {"no_kv_offload", Kind::Bool, "0"},
        {"flash_attn", Kind::Bool, "0"},
        {"tensor_split", Kind::String, "0.00"},
        {"use_mmap", Kind::Bool, r.model->use_mmap ? "1" : "0"},
        {"embeddings", Kind::Bool, "0"},
        {"n_prompt", Kind::Int, std::to_string(r.test.n_prompt)},
        {"n_gen", Kind::Int, std::to_string(r.test.n_gen)},
        {"test_time", Kind::String, r.test_time},
        {"avg_ns", Kind::Int, fmt::format("{:.0f}", avg_ns)},
        {"stddev_ns", Kind::Int, fmt::format("{:.0f}", Result::stddev(r.samples_ns))},
        {"avg_ts", Kind::Float, fmt::format("{:.6f}", r.avg_ts())},
        {"stddev_ts", Kind::Float, fmt::format("{:.6f}", r.stddev_ts())},
        // kiln's own: the kernel set, for tg the weight bandwidth, and the depth.
        {"kernels", Kind::String, std::string(kernels)},
        {"step_bytes", Kind::Int, std::to_string(r.model->step_bytes)},
        {"bandwidth_gbs", Kind::Float, opt(r.bandwidth_gbs(), 6)},
        {"roofline_gbs", Kind::Float, opt(r.roofline_gbs, 6)},
        {"roofline_fraction", Kind::Float, opt(fraction, 6)},
        // Newer llama-bench's (-d) and ik_llama.cpp's (-gp) untimed tokens before the test.
        {"n_depth", Kind::Int, std::to_string(r.test.n_depth)},
        // --compute-roofline: pp's matrix multiply-adds against the kernels' measured peak.
        {"token_macs", Kind::Int, std::to_string(r.model->token_macs)},
        {"compute_peak_gmacs", Kind::Float, opt(r.peak_macs ? std::optional(*r.peak_macs / 1e9) : std::nullopt, 3)},
        {"compute_fraction", Kind::Float, opt(compute_fraction, 6)},
    };
}

std::string json_value(const Field& f) {
    switch (f.kind) {
        case Kind::String: return fmt::format("\"{}\"", json_escape(f.value));
        case Kind::Bool: return f.value == "0" ? "false" : "true";
        case Kind::Float: return f.value.empty() ? "null" : f.value;
        case Kind::Int: return f.value;
    }
    return f.value;
}

std::string json_array(const std::vector<double>& v, bool integers) {
    std::string out = "[ ";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ", ";
        out += integers ? fmt::format("{:.0f}", v[i]) : fmt::format("{:.6f}", v[i]);
    }
    return out + " ]";
}

// SQLite's column types for llama-bench's fields; values are quoted strings,
// which SQLite converts by the column's affinity (as llama-bench writes them).
std::string_view sql_type(Kind kind) {
    switch (kind) {
        case Kind::String: return "TEXT";
        case Kind::Bool:
        case Kind::Int: return "INTEGER";
        case Kind::Float: return "REAL";
    }
    return "TEXT";
}

std::string sql_quote(std::string_view s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

std::string csv_quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

class Printer {
public:
    // show_types: the markdown table gets type_k and type_v columns (as
    // llama-bench's, when a cache type other than the default is measured).
    Printer(Format format, bool roofline, bool compute, bool show_types, std::string cpu, std::string kernels)
        : format_(format), roofline_(roofline), compute_(compute), show_types_(show_types), cpu_(std::move(cpu)),
          kernels_(std::move(kernels)) {}

    void header() {
        if (format_ == Format::Json) {
            fmt::print("[\n");
        } else if (format_ == Format::Csv) {
            std::vector<std::string> names;
            for (const Field& f : fields_of(dummy(), cpu_, kernels_)) names.push_back(f.name);
            fmt::print("{}\n", fmt::join(names, ","));
        } else if (format_ == Format::Sql) {
            // llama-bench's table, so that its compare-llama-bench.py reads kiln's rows.
            const std::vector<Field> fields = fields_of(dummy(), cpu_, kernels_);
            fmt::print("CREATE TABLE IF NOT EXISTS test (\n");
            for (size_t i = 0; i < fields.size(); ++i)
                fmt::print("  {} {}{}\n", fields[i].name, sql_type(fields[i].kind), i + 1 < fields.size() ? "," : "");
            fmt::print(");\n\n");
        } else if (format_ == Format::Markdown) {
            fmt::print("| model | size | params | backend | threads | kernels |{} test | t/s | GB/s |{}{}\n",
                       show_types_ ? " type_k | type_v |" : "", roofline_ ? " roofline |" : "",
                       compute_ ? " compute |" : "");
            fmt::print("| ------------------------------ | ---------: | ---------: | ---------- | ------: | ----------- "
                       "|{} ------------: | -------------------: | ------: |{}{}\n",
                       show_types_ ? " -----: | -----: |" : "", roofline_ ? " -------: |" : "",
                       compute_ ? " -------: |" : "");
        }
        std::fflush(stdout);
    }

    void print(const Result& r) {
        const std::vector<Field> fields = fields_of(r, cpu_, kernels_);
        switch (format_) {
            case Format::Markdown: {
                const auto bw = r.bandwidth_gbs();
                std::string roof;
                if (roofline_)
                    roof = bw && r.roofline_gbs ? fmt::format(" {:>5.1f}% of {:.1f} |", 100.0 * *bw / *r.roofline_gbs,
                                                              *r.roofline_gbs)
                                                : " |";
                const std::string types =
                    show_types_ ? fmt::format(" {:>6} | {:>6} |", r.type_k, r.type_v) : std::string();
                std::string compute;
                if (compute_) {
                    const auto macs = r.macs_per_second();
                    compute = macs && r.peak_macs ? fmt::format(" {:>5.1f}% of {:.0f} GMAC/s |", 100.0 * *macs / *r.peak_macs,
                                                                *r.peak_macs / 1e9)
                                                  : " |";
                }
                fmt::print("| {:<30} | {:>6.2f} MiB | {:>8.2f} M | {:<10} | {:>7} | {:<11} |{} {:>13} | {:>20} | {:>7} |{}{}\n",
                           r.model->type, static_cast<double>(r.model->size) / (1024.0 * 1024.0),
                           static_cast<double>(r.model->n_params) / 1e6, "CPU", r.threads, kernels_, types, r.test_name(),
                           fmt::format("{:.2f} ± {:.2f}", r.avg_ts(), r.stddev_ts()),
                           bw ? fmt::format("{:.2f}", *bw) : std::string("-"), roof, compute);
                break;
            }
            case Format::Csv: {
                std::vector<std::string> values;
                for (const Field& f : fields) values.push_back(csv_quote(f.value));
                fmt::print("{}\n", fmt::join(values, ","));
                break;
            }
            case Format::Json: {
                fmt::print("{}  {{\n", first_ ? "" : ",\n");
                for (const Field& f : fields) fmt::print("    \"{}\": {},\n", f.name, json_value(f));
                fmt::print("    \"samples_ns\": {},\n", json_array(r.samples_ns, true));
                fmt::print("    \"samples_ts\": {}\n  }}", json_array(r.samples_ts(), false));
                break;
            }
            case Format::Sql: {
                std::vector<std::string> names, values;
                for (const Field& f : fields) {
                    names.push_back(f.name);
                    values.push_back(f.kind == Kind::Float && f.value.empty() ? "NULL" : sql_quote(f.value));
                }
                fmt::print("INSERT INTO test ({}) VALUES ({});\n", fmt::join(names, ", "), fmt::join(values, ", "));
                break;
            }
            case Format::Jsonl: {
                fmt::print("{{");
                for (const Field& f : fields) fmt::print("\"{}\": {}, ", f.name, json_value(f));
                fmt::print("\"samples_ns\": {}, \"samples_ts\": {}}}\n", json_array(r.samples_ns, true),
                           json_array(r.samples_ts(), false));
                break;
            }
        }
        first_ = false;
        std::fflush(stdout);
    }

    void footer() {
        if (format_ == Format::Json) fmt::print("{}]\n", first_ ? "" : "\n");
        std::fflush(stdout);
    }

private:
    static Result dummy() {
        static const ModelInfo m;
        return Result{&m, 1, Test{1, 0, 0, "pp1"}, "", {1.0}, std::nullopt};
    }

    Format format_;
    bool roofline_, compute_, show_types_;
    std::string cpu_, kernels_;
    bool first_ = true;
};

// ------------------------------------------------------------------ main

// Every -ctk type with every -ctv type, in the order given (llama-bench's).
std::vector<kiln::CacheTypes> cache_type_pairs(const Options& o) {
    std::vector<kiln::CacheTypes> pairs;
    for (kiln::DType k : o.type_k)
        for (kiln::DType v : o.type_v) pairs.emplace_back(k, v);
    return pairs;
}

int run(const Options& o) {
    // Every model is opened and checked before anything is timed, so that a
    // typo in the last name does not cost the whole run.
    struct Loaded {
        std::shared_ptr<const kiln::GgufFile> file;
        std::unique_ptr<kiln::CausalLm> model;
        ModelInfo info;
    };
    std::vector<Test> tests;
    for (int64_t d : o.n_depth) {
        const std::string at = d > 0 ? fmt::format(" @ d{}", d) : std::string();
        for (int64_t p : o.n_prompt) tests.push_back({p, 0, d, fmt::format("pp{}{}", p, at)});
        for (int64_t n : o.n_gen) tests.push_back({0, n, d, fmt::format("tg{}{}", n, at)});
        for (const auto& [p, n] : o.pg) tests.push_back({p, n, d, fmt::format("pp{}+tg{}{}", p, n, at)});
    }
    // ik_llama.cpp's generation after a prompt: the prompt is the depth.
    for (const auto& [p, n] : o.gp) tests.push_back({0, n, p, fmt::format("tg{}@pp{}", n, p)});
    int64_t n_ctx = 1;
    for (const Test& t : tests) n_ctx = std::max(n_ctx, t.n_depth + t.n_prompt + t.n_gen);
    std::vector<Loaded> models;
    kiln::WeightPlacement placement;
    placement.mmap = o.mmap;
    for (const std::string& path : o.models) {
        Loaded l;
        l.file = std::make_shared<const kiln::GgufFile>(kiln::GgufFile::open(path));
        if (o.check_tensors) kiln::cli::check_tensors(*l.file);
        l.model = kiln::load_causal_lm(l.file, placement);
        const auto& decoder = dynamic_cast<const kiln::DecoderLm&>(*l.model);
        // A cache type this model's heads cannot hold, or a context longer than
        // its positions, fails here, before anything is timed.
        for (const kiln::CacheTypes types : cache_type_pairs(o)) {
            kiln::check_cache_types(types, decoder.arch().shape().head_dim);
            l.model->new_session(n_ctx, 1, kiln::Executor::Mode::Fast, types);
        }
        l.info = describe(path, decoder);
        l.info.use_mmap = l.model->weight_residence().placement.mmap;
        models.push_back(std::move(l));
    }

    const std::string kernels(kiln::kernels::active_matmul_kernels().name);
    const std::string cpu = kiln::bench::read_cpu_model();
    fmt::print(stderr, "kiln-bench: {}, {} logical CPUs, L3 {}; kernels {}\n", cpu, std::thread::hardware_concurrency(),
               kiln::bench::read_l3_size(), kernels);

    // By default 1 GiB: four times the largest L3 seen on the machines this ran
    // on, so the figure is DRAM bandwidth (a big model's weights come from DRAM).
    // Measured again just before each tg test, with its threads: on a shared
    // machine the bandwidth drifts by tens of percent from minute to minute.
    std::unique_ptr<kiln::bench::BandwidthBuffer> roofline_buffer;
    if (o.roofline)
        roofline_buffer = std::make_unique<kiln::bench::BandwidthBuffer>(static_cast<size_t>(o.roofline_mib) << 20);

    const auto is_default = [](kiln::DType t) { return t == kiln::cli::CacheTypeFlags::kDefault; };
    const bool show_types = !std::ranges::all_of(o.type_k, is_default) || !std::ranges::all_of(o.type_v, is_default);
    Printer printer(o.format, o.roofline, o.compute_roofline, show_types, cpu, kernels);
    // Peaks per thread count, measured once each (a few tenths of a second).
    std::map<int, std::vector<kiln::bench::ComputePeak>> peaks_by_threads;
    printer.header();
    std::mt19937 rng(1234);
    for (const Loaded& l : models) {
        const int64_t n_vocab = l.model->info().n_vocab;
        for (const kiln::CacheTypes types : cache_type_pairs(o))
        for (int threads : o.threads)
        for (int64_t batch : o.batch)
        for (int64_t ubatch : o.ubatch) {
            const int64_t piece = std::min(batch, ubatch);
            const std::unique_ptr<kiln::CausalSession> session =
                l.model->new_session(n_ctx, 1, kiln::Executor::Mode::Fast, types);
            kiln::CausalSession& ctx = *session;
            kiln::ThreadPool pool(threads);
            for (const Test& t : tests) {
                Result r{&l.info, threads, t, utc_now(), {}, std::nullopt, std::string(kiln::dtype_name(types.k)),
                         std::string(kiln::dtype_name(types.v)), batch, ubatch};
                if (o.compute_roofline && t.n_prompt > 0 && t.n_gen == 0) {
                    auto [it, fresh] = peaks_by_threads.try_emplace(threads);
                    if (fresh) {
                        it->second = kiln::bench::measure_compute_peaks(pool);
                        for (const kiln::bench::ComputePeak& p : it->second)
                            fmt::print(stderr, "kiln-bench: compute peak, {} thread{}: {} {:.1f} GMAC/s\n", threads,
                                       threads == 1 ? "" : "s", p.name, p.macs_per_second / 1e9);
                    }
                    // The amx set multiplies float weights with the avx512-vnni kernels: their peak bounds it.
                    const std::string_view peak_kernels =
                        kernels == "amx" && l.info.weight_family == "fp32" ? std::string_view("avx512-vnni") : kernels;
                    for (const kiln::bench::ComputePeak& p : it->second)
                        if (p.kernels == peak_kernels && p.family == l.info.weight_family) r.peak_macs = p.macs_per_second;
                }
                if (roofline_buffer && t.n_gen > 0 && t.n_prompt == 0) {
                    r.roofline_gbs = roofline_buffer->measure(pool, 3);
                    fmt::print(stderr, "kiln-bench: memory read bandwidth, {} thread{}: {:.2f} GB/s\n", threads,
                               threads == 1 ? "" : "s", *r.roofline_gbs);
                }
                fmt::print(stderr, "kiln-bench: {} {} threads {}: warm-up\n", l.info.type, r.test_name(), threads);
                Test warm = t;
                warm.n_gen = std::min<int64_t>(t.n_gen, 1);
                run_once(ctx, pool, rng, warm, piece, n_vocab);
                for (int rep = 0; rep < o.reps; ++rep)
                    r.samples_ns.push_back(1e9 * run_once(ctx, pool, rng, t, piece, n_vocab));
                printer.print(r);
            }
        }
    }
    printer.footer();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return kiln::cli::run_tool("kiln-bench", [&] { return run(parse(argc, argv)); });
}
