// kiln-bench as a user (or a script written for llama-bench) runs it: flags,
// the four output formats and their llama-bench field names, and errors.
// Speeds themselves are not checked (no timing assertions): only that every
// figure is present, positive and consistent with the others.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/matmul.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using nlohmann::json;

namespace {

std::string tiny_model() { return test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string()); }

test::ToolRun bench(const std::string& args) { return test::run_tool("kiln-bench", args); }

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}

// Fields llama-bench writes, in its order (examples/llama-bench/llama-bench.cpp).
const std::vector<std::string> kLlamaBenchFields = {
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type", "model_size",
    "model_n_params", "n_batch", "n_ubatch", "n_threads", "cpu_mask", "cpu_strict", "poll", "type_k", "type_v",
    "n_gpu_layers", "split_mode", "main_gpu", "no_kv_offload", "flash_attn", "tensor_split", "use_mmap",
    "embeddings", "n_prompt", "n_gen", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"};

struct FileFacts {
    uint64_t params = 0, bytes = 0, step_bytes = 0;
};

// What the file says, read here with the GGUF reader rather than taken from kiln-bench.
FileFacts facts_of(const std::filesystem::path& path) {
    const GgufFile f = GgufFile::open(path);
    FileFacts facts;
    for (const GgufTensor& t : f.tensors()) {
        facts.params += t.elements;
        facts.bytes += t.data.size();
    }
    // A decode step reads one row of each embedding table, unless the head is tied to the token embedding.
    const GgufTensor& embd = f.get_tensor("token_embd.weight");
    const bool tied = f.find_tensor("output.weight") == nullptr;
    facts.step_bytes = facts.bytes - (tied ? 0 : embd.data.size() - embd.data.size() / embd.dims[1]);
    if (const GgufTensor* positions = f.find_tensor("position_embd.weight"))
        facts.step_bytes -= positions->data.size() - positions->data.size() / positions->dims[1];
    return facts;
}

void check_record(const json& r, int threads, int64_t n_prompt, int64_t n_gen, int reps,
                  const std::filesystem::path& model = test::shared_models_dir() / "stories260K.gguf",
                  const std::string& model_type = "llama ?B all F32 (guessed)") {  // llama-bench's words for stories260K
    for (const std::string& field : kLlamaBenchFields) CHECK(r.contains(field));
    const FileFacts facts = facts_of(model);
    CHECK(r["model_size"].get<uint64_t>() == facts.bytes);
    CHECK(r["model_n_params"].get<uint64_t>() == facts.params);
    CHECK(r["model_type"].get<std::string>() == model_type);
    CHECK(r["n_threads"].get<int>() == threads);
    CHECK(r["n_prompt"].get<int64_t>() == n_prompt);
    CHECK(r["n_gen"].get<int64_t>() == n_gen);
    CHECK(r["backends"].get<std::string>() == "CPU");
    CHECK(r["kernels"].get<std::string>() == kernels::active_matmul_kernels().name);
    CHECK(r["step_bytes"].get<uint64_t>() == facts.step_bytes);
    const auto samples_ts = r["samples_ts"].get<std::vector<double>>();
    const auto samples_ns = r["samples_ns"].get<std::vector<double>>();
    REQUIRE(samples_ts.size() == static_cast<size_t>(reps));
    REQUIRE(samples_ns.size() == static_cast<size_t>(reps));
    double mean = 0;
    for (size_t i = 0; i < samples_ts.size(); ++i) {
        CHECK(samples_ns[i] > 0);
        // Each rate is the run's tokens over its time (ns are printed rounded).
        CHECK(samples_ts[i] == Approx(1e9 * static_cast<double>(n_prompt + n_gen) / samples_ns[i]).epsilon(1e-6));
        mean += samples_ts[i] / static_cast<double>(reps);
    }
    CHECK(r["avg_ts"].get<double>() == Approx(mean).epsilon(1e-6));
    if (reps == 1) CHECK(r["stddev_ts"].get<double>() == 0.0);
    if (n_gen > 0 && n_prompt == 0) {
        CHECK(r["bandwidth_gbs"].get<double>() ==
              Approx(static_cast<double>(facts.step_bytes) * mean / 1e9).epsilon(1e-3));
    } else {
        CHECK(r["bandwidth_gbs"].is_null());
    }
}

}  // namespace

TEST_CASE("kiln-bench json output has llama-bench's fields and consistent figures", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 2 -p 8 -n 4 -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json records = json::parse(run.out);
    REQUIRE(records.is_array());
    REQUIRE(records.size() == 2);
    check_record(records[0], 1, 8, 0, 2);
    check_record(records[1], 1, 0, 4, 2);
    CHECK(records[0]["roofline_gbs"].is_null());
}

TEST_CASE("kiln-bench runs every decoder architecture: a gpt2 file too", "[cli][bench]") {
    const auto gpt2 = test::fixtures_dir() / "gpt2" / "tiny_bias.gguf";
    const auto run = bench("-m " + test::shell_quote(gpt2.string()) + " -t 1 -r 1 -p 8 -n 4 -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json records = json::parse(run.out);
    REQUIRE(records.size() == 2);
    check_record(records[0], 1, 8, 0, 1, gpt2, "gpt2 ?B all F32 (guessed)");
    check_record(records[1], 1, 0, 4, 1, gpt2, "gpt2 ?B all F32 (guessed)");
}

TEST_CASE("kiln-bench jsonl: one record per line for every model x threads x test", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + "," + tiny_model() + " -t 1,2 -r 1 -p 8 -n 4 -o jsonl");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const auto lines = lines_of(run.out);
    REQUIRE(lines.size() == 8);
    for (size_t i = 0; i < lines.size(); ++i) {
        const json r = json::parse(lines[i]);
        const int threads = (i / 2) % 2 == 0 ? 1 : 2;
        check_record(r, threads, i % 2 == 0 ? 8 : 0, i % 2 == 0 ? 0 : 4, 1);
    }
}

TEST_CASE("kiln-bench csv: llama-bench's header, then one row per test", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 1 -p 8,16 -n 0 -o csv");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const auto lines = lines_of(run.out);
    REQUIRE(lines.size() == 3);  // header + pp8 + pp16; -n 0 leaves out tg
    const std::string header = lines[0];
    std::string expected_start;
    for (const std::string& f : kLlamaBenchFields) expected_start += f + ",";
    CHECK(header.rfind(expected_start, 0) == 0);
    const auto columns = [](const std::string& line) {
        // Quoted fields hold no commas in this output except inside quotes; count outside them.
        size_t n = 1;
        bool quoted = false;
        for (char c : line) {
            if (c == '"') quoted = !quoted;
            else if (c == ',' && !quoted) ++n;
        }
        return n;
    };
    CHECK(columns(lines[1]) == columns(header));
    CHECK(columns(lines[2]) == columns(header));
    CHECK(lines[1].find("\"8\",\"0\"") != std::string::npos);   // n_prompt, n_gen
    CHECK(lines[2].find("\"16\",\"0\"") != std::string::npos);
}

TEST_CASE("kiln-bench markdown: a llama-bench-like table with mean and deviation", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 2 -p 8 -n 4 --roofline --roofline-mib 16");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const auto lines = lines_of(run.out);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].rfind("| model ", 0) == 0);
    CHECK(lines[0].find("| t/s ") != std::string::npos);
    CHECK(lines[0].find("roofline") != std::string::npos);
    CHECK(lines[2].find("pp8") != std::string::npos);
    CHECK(lines[3].find("tg4") != std::string::npos);
    for (int i : {2, 3}) {
        CHECK(lines[static_cast<size_t>(i)].find("llama ?B all F32 (guessed)") != std::string::npos);
        CHECK(lines[static_cast<size_t>(i)].find(" ± ") != std::string::npos);
    }
    CHECK(lines[3].find("% of ") != std::string::npos);
    CHECK(run.err.find("memory read bandwidth, 1 thread") != std::string::npos);
}

TEST_CASE("kiln-bench --roofline gives tg's bandwidth as a fraction of the measured one", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 1 -p 0 -n 4 --roofline --roofline-mib 16 -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json records = json::parse(run.out);
    REQUIRE(records.size() == 1);
    const json& r = records[0];
    REQUIRE(r["roofline_gbs"].get<double>() > 0);
    CHECK(r["roofline_fraction"].get<double>() ==
          Approx(r["bandwidth_gbs"].get<double>() / r["roofline_gbs"].get<double>()).epsilon(1e-3));
}

// --compute-roofline: pp's matrix multiply-adds per second against the peak of
// the kernels in use. The multiply-adds per token are counted here from the
// file's matrices (every 2-D tensor but the embedding table, which a token
// reads one row of, unless the head is tied to it).
TEST_CASE("kiln-bench --compute-roofline gives pp's multiply-adds as a fraction of the measured peak", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 1 -p 16 -n 0 --compute-roofline -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json records = json::parse(run.out);
    REQUIRE(records.size() == 1);
    const json& r = records[0];
    const GgufFile f = GgufFile::open(test::shared_models_dir() / "stories260K.gguf");
    const bool tied = f.find_tensor("output.weight") == nullptr;
    uint64_t macs = 0;
    for (const GgufTensor& t : f.tensors())
        if (t.dims.size() == 2 && (t.name != "token_embd.weight" || tied)) macs += t.dims[0] * t.dims[1];
    CHECK(r["token_macs"].get<uint64_t>() == macs);
    const std::string kernels = r["kernels"].get<std::string>();
    if (kernels == "avx2" || kernels == "avx512-vnni") {  // the sets with a peak of their own
        REQUIRE(r["compute_peak_gmacs"].get<double>() > 0);
        CHECK(r["compute_fraction"].get<double>() ==
              Approx(r["avg_ts"].get<double>() * static_cast<double>(macs) / 1e9 / r["compute_peak_gmacs"].get<double>())
                  .epsilon(1e-3));
        CHECK(run.err.find("compute peak, 1 thread: fp32 FMA") != std::string::npos);
    }
    // Generation has no compute figure.
    const auto tg = bench("-m " + tiny_model() + " -t 1 -r 1 -p 0 -n 2 --compute-roofline -o json");
    REQUIRE(tg.status == 0);
    CHECK(json::parse(tg.out)[0]["compute_fraction"].is_null());
}

// The KV cache types in llama-bench's fields: f16 by default (as llama-bench),
// -ctk and -ctv each their own, lists measured pair by pair; the markdown
// table gets type_k/type_v columns when a type other than f16 is measured.
TEST_CASE("kiln-bench -ctk/-ctv report type_k and type_v", "[cli][bench]") {
    const auto plain = bench("-m " + tiny_model() + " -t 1 -r 1 -p 8 -n 4 -o json");
    INFO(plain.err);
    REQUIRE(plain.status == 0);
    for (const json& r : json::parse(plain.out)) {
        CHECK(r["type_k"] == "f16");
        CHECK(r["type_v"] == "f16");
    }
    const auto f32 = bench("-m " + tiny_model() + " -t 1 -r 1 -p 8 -n 0 -o json -ctk f32 --cache-type-v bf16");
    INFO(f32.err);
    REQUIRE(f32.status == 0);
    CHECK(json::parse(f32.out)[0]["type_k"] == "f32");
    CHECK(json::parse(f32.out)[0]["type_v"] == "bf16");

    const auto pairs = bench("-m " + tiny_model() + " -t 1 -r 1 -p 0 -n 2 -o json -ctk f32,f16 -ctv bf16,f16");
    INFO(pairs.err);
    REQUIRE(pairs.status == 0);
    const json records = json::parse(pairs.out);
    REQUIRE(records.size() == 4);
    const std::vector<std::pair<std::string, std::string>> want{
        {"f32", "bf16"}, {"f32", "f16"}, {"f16", "bf16"}, {"f16", "f16"}};
    for (size_t i = 0; i < 4; ++i) {
        CHECK(records[i]["type_k"] == want[i].first);
        CHECK(records[i]["type_v"] == want[i].second);
        CHECK(records[i]["avg_ts"].get<double>() > 0);
    }

    const auto md = bench("-m " + tiny_model() + " -t 1 -r 1 -p 0 -n 2 -ctk f32");
    REQUIRE(md.status == 0);
    CHECK(md.out.find("| type_k | type_v |") != std::string::npos);
    CHECK(md.out.find("|    f32 |    f16 |") != std::string::npos);
    const auto md_default = bench("-m " + tiny_model() + " -t 1 -r 1 -p 0 -n 2");
    REQUIRE(md_default.status == 0);
    CHECK(md_default.out.find("type_k") == std::string::npos);
}

// KILN_PROFILE=1: the executor's per-step table on stderr at exit. stories260K
// has 5 layers, so every per-layer step runs a multiple of 5 times, and the
// shares add up to 100%.
TEST_CASE("KILN_PROFILE prints where the time went per step and thread", "[cli][bench]") {
    ::setenv("KILN_PROFILE", "1", 1);
    const auto run = bench("-m " + tiny_model() + " -t 2 -r 1 -p 16 -n 4");
    ::unsetenv("KILN_PROFILE");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const std::vector<std::string> lines = lines_of(run.err);
    const auto header = std::find_if(lines.begin(), lines.end(),
                                     [](const std::string& l) { return l.starts_with("KILN_PROFILE:"); });
    REQUIRE(header != lines.end());
    REQUIRE(header + 1 != lines.end());
    CHECK_THAT(header[1], Catch::Contains("thread 0") && Catch::Contains("thread 1"));
    double shares = 0;
    bool saw_attention = false, saw_matmul = false, saw_waits = false;
    for (auto it = header + 2; it != lines.end(); ++it) {
        std::istringstream row(*it);
        std::vector<std::string> words;
        for (std::string w; row >> w;) words.push_back(w);
        REQUIRE(words.size() >= 3);
        shares += std::stod(words.back());
        if (words[0] == "(barrier") {
            saw_waits = true;
            continue;
        }
        saw_matmul = saw_matmul || words[0] == "matmul";
        if (words[0] == "cached_attention") {
            saw_attention = true;
            CHECK(std::stol(words[1]) % 5 == 0);
        }
    }
    CHECK((saw_attention && saw_matmul && saw_waits));
    CHECK(shares == Approx(100.0).margin(0.5));
}

TEST_CASE("kiln-bench refuses bad flags and files with one line", "[cli][bench]") {
    const std::string m = tiny_model();
    struct Case {
        std::string args;
        int status;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"-t 1", 2, "a model is required"},
        {"-m " + m + " -o xml", 2, "-o must be md, csv, json, jsonl or sql, got 'xml'"},
        {"-m " + m + " -t 0", 2, "-t must be between 1 and 1024, got 0"},
        {"-m " + m + " -t 1,x", 2, "-t expects an integer, got 'x'"},
        {"-m " + m + " -p 0 -n 0", 2, "nothing to measure"},
        {"-m " + m + " -r 0", 2, "-r must be between 1 and 10000, got 0"},
        {"-m " + m + " -p", 2, "-p needs a value"},
        {"-m " + m + " --bogus", 2, "unknown argument '--bogus'"},
        {"-m " + m + " -ctk q4_1", 2, "-ctk must list f32, f16, bf16, q8_0 or q4_0, got 'q4_1'"},
        {"-m " + m + " -ctv f16,", 2, "-ctv must list f32, f16, bf16, q8_0 or q4_0, got ''"},
        {"-m " + m + " -ctk q8_0", 1, "q8_0 key cache needs a head size that is a multiple of 32"},
        {"-m " + m + ", -r 1", 2, "-m got an empty file name"},
        {"-m " + m + " -pg 5", 2, "-pg takes PP,TG (two numbers), got '5'"},
        {"-m " + m + " -gp 1,2,3", 2, "-gp takes PP,TG (two numbers), got '1,2,3'"},
        {"-m " + m + " -gp 0,2", 2, "-gp must be between 1 and"},
        {"-m " + m + " -mmp 2", 2, "-mmp must be between 0 and 1, got 2"},
        {"-m " + m + " -fa 0,1", 2, "-fa takes one value in kiln-bench (0 or 1), got '0,1'"},
        {"-m " + m + " -d -1", 2, "-d must be between 0 and"},
        {"-m /nonexistent/model.gguf", 1, "/nonexistent/model.gguf"},
        // A test longer than a model's positions is refused before anything is timed.
        {"-m " + m + " -m " + test::shell_quote((test::source_dir() / "models" / "shakespeare-char.gguf").string()) +
             " -p 0 -n 128",
         1, "context 128 is outside 1..64"},
        {"-m " + test::shell_quote((test::shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string()) +
             " -r 1 -p 8 -n 0",
         1, "[model]"},
    };
    for (const Case& c : cases) {
        INFO(c.args);
        const auto run = bench(c.args);
        CHECK(run.status == c.status);
        CHECK(run.err.find(c.message) != std::string::npos);
        CHECK(lines_of(run.err).size() == 1);
        CHECK(run.out.empty());
    }
    const auto help = bench("--help");
    CHECK(help.status == 0);
    CHECK(help.out.find("usage: kiln-bench") != std::string::npos);
}

TEST_CASE("kiln-bench -pg, -gp and -d time a prompt with generation, and generation at depth", "[cli][bench]") {
    const auto run = bench("-m " + tiny_model() + " -t 1 -r 2 -p 8 -n 4 -pg 8,4 -gp 16,4 -d 0,12 -b 5 -ub 3 -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json records = json::parse(run.out);
    std::vector<std::string> names;
    // -d 0 then -d 12 for pp, tg and pg; -gp last.
    const std::vector<std::tuple<int64_t, int64_t, int64_t>> expected = {
        {8, 0, 0}, {0, 4, 0}, {8, 4, 0}, {8, 0, 12}, {0, 4, 12}, {8, 4, 12}, {0, 4, 16}};
    REQUIRE(records.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        const auto& [p, n, d] = expected[i];
        INFO(i);
        check_record(records[i], 1, p, n, 2);
        CHECK(records[i]["n_depth"].get<int64_t>() == d);
        CHECK(records[i]["n_batch"].get<int64_t>() == 5);
        CHECK(records[i]["n_ubatch"].get<int64_t>() == 3);
    }
    // The names llama-bench (pp, tg, pg, "@ d") and ik_llama.cpp (tg@pp) print.
    const auto table = bench("-m " + tiny_model() + " -t 1 -r 1 -p 8 -n 0 -pg 8,4 -gp 16,4 -d 12");
    REQUIRE(table.status == 0);
    CHECK_THAT(table.out, Catch::Contains(" pp8 @ d12 |") && Catch::Contains(" pp8+tg4 @ d12 |") &&
                              Catch::Contains(" tg4@pp16 |"));
}

TEST_CASE("kiln-bench -o sql writes llama-bench's SQLite table, which SQLite loads", "[cli][bench]") {
    test::TempDir dir;
    const auto db = dir.path() / "bench.sqlite";
    const auto sql = dir.path() / "bench.sql";
    const auto run = test::run_tool("kiln-bench", "-m " + tiny_model() + " -t 1 -r 1 -p 8 -n 4 -o sql");
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK_THAT(run.out, Catch::StartsWith("CREATE TABLE IF NOT EXISTS test (\n  build_commit TEXT,\n"));
    test::write_file(sql, std::span(reinterpret_cast<const std::byte*>(run.out.data()), run.out.size()));
    // use_mmap is 1: the weights are read from the file mapping by default, as llama-bench's.
    // Python's sqlite3 (SQLite itself) runs the statements and reads the rows back, twice: the
    // table is created only if missing, so runs accumulate in one database as with llama-bench.
    const std::string script =
        "import sqlite3; c = sqlite3.connect('" + db.string() + "'); s = open('" + sql.string() +
        "').read(); c.executescript(s); c.executescript(s); "
        "rows = c.execute('select n_prompt, n_gen, typeof(avg_ts), typeof(n_threads), use_mmap, model_type from test')"
        ".fetchall(); print(rows)";
    const auto out = dir.path() / "rows.txt";
    REQUIRE(std::system(fmt::format("python3 -c {} > {}", test::shell_quote(script), test::shell_quote(out.string())).c_str()) == 0);
    const auto bytes = test::read_file(out);
    const std::string rows(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    CHECK(rows == "[(8, 0, 'real', 'integer', 1, 'llama ?B all F32 (guessed)'), (0, 4, 'real', 'integer', 1, 'llama ?B all F32 "
                  "(guessed)'), (8, 0, 'real', 'integer', 1, 'llama ?B all F32 (guessed)'), (0, 4, 'real', 'integer', 1, "
                  "'llama ?B all F32 (guessed)')]\n");
}

TEST_CASE("kiln-kernel-bench --batch and --no-matvec: the batched table alone, at the shape and tokens asked", "[cli][bench]") {
    const std::string tool = test::program_command(std::filesystem::path(KILN_BENCH_DIR) / "kiln-kernel-bench");
    const test::ToolRun run = test::run_command(tool + " --quick -t 1 --types q8_0,q4_0 --no-matvec --batch 48x256:9");
    INFO(run.out << run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out.find("## Matvec") == std::string::npos);
    CHECK(run.out.find("## Batched matmul (9 tokens, 48x256 weights)") != std::string::npos);
    int batched_rows = 0;
    for (const std::string& line : lines_of(run.out))
        if (line.starts_with("| q") && line.find(" | 1 | ") != std::string::npos &&
            std::count(line.begin(), line.end(), '|') == 6)
            ++batched_rows;
    CHECK(batched_rows == 2);
}

TEST_CASE("kiln-kernel-bench --types and --shapes: the named kernels only, bad values in one line", "[cli][bench]") {
    const std::string tool = test::program_command(std::filesystem::path(KILN_BENCH_DIR) / "kiln-kernel-bench");
    // --quick: a smoke test of the flags, not a measurement (no timing is checked).
    const test::ToolRun run = test::run_command(tool + " --quick -t 1 --types q4_K,q8_0 --shapes 64x256,32x512");
    INFO(run.out << run.err);
    REQUIRE(run.status == 0);
    std::vector<std::string> matvec_rows;
    for (const std::string& line : lines_of(run.out))
        if (line.starts_with("| q") && line.find('x') != std::string::npos && line.find(" | 1 | ") != std::string::npos &&
            std::count(line.begin(), line.end(), '|') == 10)
            matvec_rows.push_back(line);
    // Two types x two shapes, the type named as the set holds it (q4_K may be interleaved: q4_K_r16).
    REQUIRE(matvec_rows.size() == 4);
    CHECK(matvec_rows[0].find(" | 64x256 | ") != std::string::npos);
    CHECK(matvec_rows[1].find(" | 32x512 | ") != std::string::npos);
    CHECK(matvec_rows[0].starts_with("| q4_K"));
    CHECK(matvec_rows[2].starts_with("| q8_0"));

    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
             {"--types q9_Z", "unknown type 'q9_Z'"},
             {"--types iq2_xxs", "does not multiply with iq2_xxs"},
             {"--shapes 64by256", "'64by256' is not ROWSxK"},
             {"--types q4_K --shapes 64x100", "k = 100 is not a whole number of q4_K blocks"},
             {"--batch 64x256", "--batch: expected ROWSxK:TOKENS, got '64x256'"},
             {"--batch 64x256:0", "--batch"},
             {"--types q8_0 --batch 64x100:8", "--batch: k = 100 is not a whole number of q8_0 blocks"}}) {
        const test::ToolRun bad = test::run_command(tool + " " + args);
        INFO(args << ": " << bad.out << bad.err);
        CHECK(bad.status != 0);
        CHECK(bad.out.empty());  // refused before measuring anything
        CHECK(lines_of(bad.err).size() == 1);
        CHECK(bad.err.find(says) != std::string::npos);
    }
}
