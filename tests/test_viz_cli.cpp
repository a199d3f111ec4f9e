// kiln-viz as a user runs it: the PNGs read back with Pillow
// (tests/viz/check_png.py: size, the maps' frames, a causal map's background
// above its diagonal), the npz files with numpy.load(allow_pickle=False), the
// position tables against the paper's formula, and bad input as one line,
// exit 1 and no file written.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/paths.h"
#include "support/png_header.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::shell_quote;

std::string q(const fs::path& p) { return shell_quote(p.string()); }

const fs::path kShakespeare = test::source_dir() / "models" / "shakespeare-char.gguf";
fs::path stories() { return test::shared_models_dir() / "stories260K.gguf"; }

test::ToolRun viz(const std::string& args) { return test::run_tool("kiln-viz", args); }

// check_png.py's facts about a picture.
json png_facts(const fs::path& png, int cells = 0) {
    const auto run = test::run_command("/usr/bin/python3 " + q(test::source_dir() / "tests" / "viz" / "check_png.py") + " " +
                                       q(png) + (cells > 0 ? fmt::format(" --cells {}", cells) : std::string()));
    INFO(run.err);
    REQUIRE(run.status == 0);
    return json::parse(run.out);
}

// Runs Python with numpy on an npz file bound to `d` (loaded with allow_pickle=False); prints what `code` prints.
std::string numpy(const fs::path& npz, const std::string& code) {
    const std::string script = "import sys, numpy as np\nd = np.load(sys.argv[1], allow_pickle=False)\n" + code;
    const auto run = test::run_command("/usr/bin/python3 -c " + shell_quote(script) + " " + q(npz));
    INFO(run.err);
    REQUIRE(run.status == 0);
    return run.out;
}

// A path as a Python string literal (the test paths hold no quotes).
std::string py_string(const fs::path& p) { return fmt::format("'{}'", p.string()); }

// One line on stderr naming `words`, exit 1.
void require_one_line(const test::ToolRun& run, const std::string& words) {
    INFO(run.err);
    CHECK(run.status == 1);
    CHECK(run.err.find(words) != std::string::npos);
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
}

std::set<std::string> names_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

}  // namespace

TEST_CASE("kiln-viz attention: a grid of layers x heads causal maps and the npz", "[viz][cli]") {
    test::TempDir dir;
    const auto run = viz("attention -m " + q(stories()) + " -p 'Once upon a time' -n 8 -t 2 -o " + q(dir.path() / "a.png") +
                         " --npz " + q(dir.path() / "a.npz"));
    INFO(run.err);
    REQUIRE(run.status == 0);
    // stories260K: 5 layers of 8 heads; "<s> Once upon a time" is 5 tokens, and 8 more.
    const json facts = png_facts(dir.path() / "a.png", 13);
    CHECK(facts["maps"].size() == 5 * 8);
    for (const json& upper : facts["upper_background"]) CHECK(upper.get<bool>());
    for (const json& ink : facts["diagonal_ink"]) CHECK(ink.get<int>() > 0);
    CHECK(numpy(dir.path() / "a.npz",
                "s, t = d['self'], d['tokens']\n"
                "print(sorted(d.files), s.dtype, s.shape, t.dtype.kind, t.shape, t[1])\n"
                "print(abs(s.sum(-1) - 1).max() < 1e-5, (np.triu(s, 1) == 0).all())\n") ==
          "['self', 'tokens'] float32 (5, 8, 13, 13) U (13,) ▁Once\nTrue True\n");
}

TEST_CASE("kiln-viz attention --layer --head: one map with the tokens on both axes", "[viz][cli]") {
    test::TempDir dir;
    const auto run = viz("attention -m " + q(kShakespeare) + " -p 'ROMEO:' -n 10 -t 2 --layer 3 --head 1 -o " +
                         q(dir.path() / "one.png"));
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json facts = png_facts(dir.path() / "one.png", 16);
    REQUIRE(facts["maps"].size() == 1);
    CHECK(facts["upper_background"][0].get<bool>());
    CHECK(facts["diagonal_ink"][0].get<int>() > 0);
    // 16 cells, each 40 pixels (the largest cell): the map is 640 pixels square.
    CHECK(facts["maps"][0][2].get<int>() == 16 * 40);
    CHECK(facts["maps"][0][3].get<int>() == 16 * 40);
}

TEST_CASE("kiln-viz attention on an encoder-decoder: encoder, decoder and cross maps", "[viz][cli][transformer]") {
    test::TempDir dir;
    const fs::path model = dir.path() / "r.gguf";
    const auto train = test::run_tool("kiln-train", "--task reverse -o " + q(model) +
                                                        " --max-length 5 --held-out 10 --layers 2 --heads 2 --width 16 "
                                                        "--batch 8 --iters 4 --warmup 1 --eval-interval 4 -t 2");
    INFO(train.err);
    REQUIRE(train.status == 0);
    const auto run = viz("attention -m " + q(model) + " -p abcd -n 3 -t 2 -o " + q(dir.path() / "g.png") + " --npz " +
                         q(dir.path() / "g.npz"));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(png_facts(dir.path() / "g.png")["maps"].size() == 3 * 2 * 2);
    // Source "abcd" + EOS; target BOS + up to 3 greedy tokens (fewer when EOS comes first).
    const std::string shapes = numpy(dir.path() / "g.npz",
                                     "t = len(d['target_tokens'])\n"
                                     "print(sorted(d.files))\n"
                                     "print(d['encoder'].shape == (2, 2, 5, 5), d['decoder'].shape == (2, 2, t, t), "
                                     "d['cross'].shape == (2, 2, t, 5), d['source_tokens'].dtype.kind)\n"
                                     "print(all(abs(d[k].sum(-1) - 1).max() < 1e-5 for k in ('encoder', 'decoder', 'cross')),"
                                     " (np.triu(d['decoder'], 1) == 0).all(), t)\n");
    CHECK(shapes.starts_with("['cross', 'decoder', 'encoder', 'source_tokens', 'target_tokens']\nTrue True True U\nTrue True "));
    const auto one = viz("attention -m " + q(model) + " -p abcd -n 3 -t 2 --kind encoder --layer 1 --head 1 -o " +
                         q(dir.path() / "e.png"));
    INFO(one.err);
    REQUIRE(one.status == 0);
    const json facts = png_facts(dir.path() / "e.png", 5);
    REQUIRE(facts["maps"].size() == 1);
    CHECK_FALSE(facts["upper_background"][0].get<bool>());  // the encoder sees the whole source
}

TEST_CASE("kiln-viz attention refuses bad input with one line and writes nothing", "[viz][cli]") {
    test::TempDir dir;
    const std::string outputs = " -o " + q(dir.path() / "m.png") + " --npz " + q(dir.path() / "m.npz");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p " + std::string(70, 'a') + outputs),
                     "do not fit the context of 64");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p abc -n 62" + outputs), "do not fit the context of 64");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p abc --layer 4 --head 0" + outputs),
                     "--layer 4 is out of range: the model has layers 0..3");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p abc --layer 0 --head 4" + outputs),
                     "--head 4 is out of range: the model has heads 0..3");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p abc -o " + q(dir.path() / "missing" / "m.png")),
                     "does not exist");
    require_one_line(viz("attention -m " + q(kShakespeare) + " -p abc -o " + q(dir.path() / "m.png") + " --npz " +
                         q(dir.path() / "missing" / "m.npz")),
                     "does not exist");
    require_one_line(viz("attention -m " + q(dir.path() / "none.gguf") + " -p abc" + outputs), "none.gguf");
    CHECK(names_in(dir.path()).empty());
    const auto usage = viz("attention -m " + q(kShakespeare) + " -p abc --layer 1" + outputs);
    CHECK(usage.status == 2);
    CHECK(viz("nonsense").status == 2);
    CHECK(names_in(dir.path()).empty());
}

TEST_CASE("kiln-viz positions: the sinusoidal table equals the paper's formula", "[viz][cli][transformer]") {
    test::TempDir dir;
    const auto run = viz("positions -m " + q(test::fixtures_dir() / "transformer" / "tiny_postln.gguf") + " -o " +
                         q(dir.path() / "pe.png") + " --npz " + q(dir.path() / "pe.npz"));
    INFO(run.err);
    REQUIRE(run.status == 0);
    // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    CHECK(numpy(dir.path() / "pe.npz",
                "t = d['table'].astype(np.float64)\n"
                "n, dim = t.shape\n"
                "pos = np.arange(n)[:, None]\n"
                "angle = pos / np.power(10000.0, np.arange(0, dim, 2) / dim)\n"
                "print(t.shape, abs(t[:, 0::2] - np.sin(angle)).max() < 1e-6, abs(t[:, 1::2] - np.cos(angle)).max() < 1e-6)\n") ==
          "(32, 24) True True\n");
    const json facts = png_facts(dir.path() / "pe.png");
    CHECK(facts["maps"].size() == 1);
}

TEST_CASE("kiln-viz positions: learned positions and RoPE frequencies", "[viz][cli]") {
    test::TempDir dir;
    REQUIRE(viz("positions -m " + q(kShakespeare) + " -o " + q(dir.path() / "gpt.png") + " --npz " +
                q(dir.path() / "gpt.npz")).status == 0);
    // The table is the file's position_embd.weight, read by the reference scripts' own GGUF reader.
    CHECK(numpy(dir.path() / "gpt.npz",
                "sys.path.insert(0, " + py_string(test::source_dir() / "tests" / "reference") + ")\n"
                "import gguf_io\n"
                "w = gguf_io.read_gguf(" + py_string(kShakespeare) + ").tensors['position_embd.weight']\n"
                "print(d['table'].shape, np.array_equal(d['table'], np.asarray(w, dtype=np.float32)))\n") ==
          "(64, 128) True\n");
    // Llama 3.1's rope_freqs: each base frequency divided by its factor.
    const fs::path llama3 = test::fixtures_dir() / "llama_family" / "llama3.gguf";
    REQUIRE(viz("positions -m " + q(llama3) + " -o " + q(dir.path() / "rope.png") + " --npz " + q(dir.path() / "rope.npz"))
                .status == 0);
    CHECK(numpy(dir.path() / "rope.npz",
                "sys.path.insert(0, " + py_string(test::source_dir() / "tests" / "reference") + ")\n"
                "import gguf_io\n"
                "f = gguf_io.read_gguf(" + py_string(llama3) + ")\n"
                "m = f.metadata\n"
                "n_rot = int(m.get('llama.rope.dimension_count', m['llama.embedding_length'] // m['llama.attention.head_count']))\n"
                "base = float(m.get('llama.rope.freq_base', 10000.0)) ** (-2.0 * np.arange(n_rot // 2) / n_rot)\n"
                "want = base / np.asarray(f.tensors['rope_freqs.weight'], dtype=np.float64)\n"
                "print(np.allclose(d['base'], base, rtol=1e-6), np.allclose(d['scaled'], want, rtol=1e-6), "
                "not np.allclose(d['scaled'], base))\n") == "True True True\n");
    CHECK(test::png_size(dir.path() / "rope.png").has_value());
    // Phi-3's LongRoPE: a frequency set per factor tensor.
    const fs::path phi3 = test::fixtures_dir() / "phi3" / "phi3_longrope.gguf";
    REQUIRE(viz("positions -m " + q(phi3) + " -o " + q(dir.path() / "phi3.png") + " --npz " + q(dir.path() / "phi3.npz"))
                .status == 0);
    CHECK(numpy(dir.path() / "phi3.npz",
                "sys.path.insert(0, " + py_string(test::source_dir() / "tests" / "reference") + ")\n"
                "import gguf_io\n"
                "f = gguf_io.read_gguf(" + py_string(phi3) + ")\n"
                "b = d['base'].astype(np.float64)\n"
                "print(sorted(d.files), all(np.allclose(d[k], b / np.asarray(f.tensors['rope_factors_' + k + '.weight'], "
                "dtype=np.float64), rtol=1e-6) for k in ('short', 'long')))\n") == "['base', 'long', 'short'] True\n");
}

TEST_CASE("kiln-viz train and bench draw charts, and bad files are refused", "[viz][cli]") {
    test::TempDir dir;
    const fs::path csv = test::source_dir() / "models" / "shakespeare-char.csv";
    REQUIRE(viz("train " + q(csv) + " -o " + q(dir.path() / "loss.png")).status == 0);
    REQUIRE(viz("train " + q(csv) + " --log -o " + q(dir.path() / "log.png")).status == 0);
    for (const char* name : {"loss.png", "log.png"}) {
        const auto size = test::png_size(dir.path() / name);
        REQUIRE(size);
        CHECK(size->width == 900);
        CHECK(size->height == 540);
    }
    const fs::path fixtures = test::fixtures_dir() / "viz";
    const auto bench = viz("bench " + q(fixtures / "kiln_bench.jsonl") + " " + q(fixtures / "llama_bench.json") + " -o " +
                           q(dir.path() / "bench.png"));
    INFO(bench.err);
    REQUIRE(bench.status == 0);
    CHECK(test::png_size(dir.path() / "bench.png").has_value());

    require_one_line(viz("train " + q(fixtures / "kiln_bench.jsonl") + " -o " + q(dir.path() / "x.png")),
                     "is not a kiln-train CSV log");
    require_one_line(viz("bench " + q(csv) + " -o " + q(dir.path() / "y.png")), "is not kiln-bench or llama-bench JSON");
    require_one_line(viz("train " + q(csv) + " -o " + q(dir.path() / "missing" / "z.png")), "does not exist");
    CHECK(names_in(dir.path()) == std::set<std::string>{"loss.png", "log.png", "bench.png"});
}

}  // namespace kiln

namespace kiln {

TEST_CASE("kiln-viz --help names every command, each command has its own", "[viz][cli]") {
    const auto top = test::run_tool("kiln-viz", "--help");
    CHECK(top.status == 0);
    for (const char* command : {"attention", "positions", "train", "bench"}) {
        CHECK(top.out.find(std::string("  ") + command) != std::string::npos);
        const auto own = test::run_tool("kiln-viz", std::string(command) + " --help");
        CHECK(own.status == 0);
        CHECK(own.out.starts_with(std::string("usage: kiln-viz ") + command));
    }
    const auto none = test::run_tool("kiln-viz", "");
    CHECK(none.status == 2);
    CHECK(none.err.find("a command is required") != std::string::npos);
}

}  // namespace kiln
