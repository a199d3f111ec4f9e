// kiln-train as a user runs it: resuming reproduces an uninterrupted run bit
// for bit, the files it writes, and clear errors for bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "engine/train/gpt_gguf.h"
#include "engine/train/seq2seq_gguf.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/png_header.h"
#include "support/run_tool.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A folder of its own per process (the pid in its name), so that two runs of
// the suite at once do not share it.
struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

// A small model and text so that a run takes a fraction of a second.
const std::string kSmall = "--layers 1 --heads 2 --width 16 --context 16 --batch 3 --warmup 2 --decay-iters 8 "
                           "--eval-interval 4 --eval-batches 2 -t 2 --dropout 0.1";

fs::path small_text(const TempDir& dir) {
    const std::string all = slurp(test::shared_dir() / "data" / "tinyshakespeare.txt");
    REQUIRE(all.size() > 20000);
    const fs::path p = dir.path / "text.txt";
    write(p, all.substr(0, 20000));
    return p;
}

// The CSV without the timing column (tokens/s), which differs between runs.
std::string losses_of(const fs::path& csv) {
    std::istringstream in(slurp(csv));
    std::string line, out;
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string c;
        while (std::getline(ss, c, ',')) cells.push_back(c);
        if (cells.size() > 4) cells[4] = "";
        for (const auto& c2 : cells) out += c2 + ",";
        out += "\n";
    }
    return out;
}

// Run "a" trained without a stop and run "b" stopped and resumed wrote the
// same model, the same checkpoint and the same losses, bit for bit.
void check_resumed_run_equals_uninterrupted(const fs::path& dir) {
    CHECK(slurp(dir / "a.gguf") == slurp(dir / "b.gguf"));
    CHECK(slurp(dir / "a.ckpt.gguf") == slurp(dir / "b.ckpt.gguf"));
    CHECK(losses_of(dir / "a.csv") == losses_of(dir / "b.csv"));
}

}  // namespace

TEST_CASE("kiln-train: 8 steps equal 4 steps, --resume, 4 more", "[train][cli]") {
    TempDir dir("kiln-train-resume");
    const fs::path text = small_text(dir);
    const auto whole = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " +
                                                        test::shell_quote((dir.path / "a.gguf").string()) + " --iters 8 " + kSmall);
    INFO(whole.err);
    REQUIRE(whole.status == 0);
    for (const char* ext : {".gguf", ".ckpt.gguf", ".csv", ".png"}) CHECK(fs::exists(dir.path / (std::string("a") + ext)));
    CHECK(whole.err.find("step 8: train loss") != std::string::npos);

    const std::string b = test::shell_quote((dir.path / "b.gguf").string());
    const auto first = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + b + " --iters 4 " + kSmall);
    INFO(first.err);
    REQUIRE(first.status == 0);
    const auto second = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + b + " --iters 8 " +
                                                         kSmall + " --resume " +
                                                         test::shell_quote((dir.path / "b.ckpt.gguf").string()));
    INFO(second.err);
    REQUIRE(second.status == 0);
    CHECK(second.err.find("resuming at step 4") != std::string::npos);
    check_resumed_run_equals_uninterrupted(dir.path);

    // The final model is a gpt2 GGUF with the char vocabulary, and reads back.
    const GgufFile model = GgufFile::open(dir.path / "a.gguf");
    CHECK(model.get_string("general.architecture") == "gpt2");
    CHECK(model.get_string("tokenizer.ggml.model") == "char");
    CHECK(model.find_tensor("output.weight") == nullptr);  // tied
    CHECK(model.find_tensor("blk.0.attn_qkv.bias") == nullptr);  // no biases by default
    CHECK(model.get_tensor("blk.0.attn_qkv.weight").dims == std::vector<uint64_t>{16, 48});
    const auto loaded = train::read_gpt_checkpoint(dir.path / "a.gguf");
    CHECK(!loaded.training);

    const auto q8 = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " +
                                                     test::shell_quote((dir.path / "q.gguf").string()) + " --iters 2 --type q8_0 " + kSmall);
    REQUIRE(q8.status == 0);
    CHECK(GgufFile::open(dir.path / "q.gguf").get_tensor("blk.0.ffn_down.weight").type == DType::Q8_0);
    CHECK(GgufFile::open(dir.path / "q.gguf").get_tensor("blk.0.ffn_norm.weight").type == DType::F32);
}

TEST_CASE("kiln-train --arch llama: 8 steps equal 4 steps, --resume, 4 more, and the file runs in kiln", "[train][cli]") {
    TempDir dir("kiln-train-llama");
    const fs::path text = small_text(dir);
    const std::string llama = " " + kSmall + " --arch llama --heads 4 --kv-heads 2";
    const std::string a = test::shell_quote((dir.path / "a.gguf").string()), b = test::shell_quote((dir.path / "b.gguf").string());
    const auto whole = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + a + " --iters 8" + llama);
    INFO(whole.err);
    REQUIRE(whole.status == 0);
    CHECK(whole.err.find("llama, 1 layers, 4 heads (2 key/value)") != std::string::npos);
    const auto first = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + b + " --iters 4" + llama);
    REQUIRE(first.status == 0);
    const auto second = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + b + " --iters 8" + llama +
                                                         " --resume " + test::shell_quote((dir.path / "b.ckpt.gguf").string()));
    INFO(second.err);
    REQUIRE(second.status == 0);
    check_resumed_run_equals_uninterrupted(dir.path);

    const GgufFile model = GgufFile::open(dir.path / "a.gguf");
    CHECK(model.get_string("general.architecture") == "llama");
    CHECK(model.get_int("llama.attention.head_count_kv") == 2);
    CHECK(model.get_string("tokenizer.ggml.model") == "char");
    CHECK(model.find_tensor("output.weight") != nullptr);  // untied unless --tie-embeddings
    const auto run = test::run_tool("kiln", "-m " + a + " -p 'To be' -n 8 --temp 0");
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.out.starts_with("To be"));
}

TEST_CASE("kiln-train --arch llama --vocab: a SentencePiece vocabulary's tokens, its keys in the file", "[train][cli]") {
    TempDir dir("kiln-train-llama-spm");
    const fs::path text = small_text(dir);
    const fs::path vocab = test::shared_models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf";
    const std::string out = test::shell_quote((dir.path / "spm.gguf").string());
    const auto run = test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + out +
                                                      " --arch llama --tie-embeddings --vocab " +
                                                      test::shell_quote(vocab.string()) + " --iters 2 " + kSmall);
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.err.find("vocabulary 32000") != std::string::npos);
    const GgufFile model = GgufFile::open(dir.path / "spm.gguf");
    CHECK(model.get_string("tokenizer.ggml.model") == "llama");
    CHECK(model.find_tensor("output.weight") == nullptr);
    const auto generate = test::run_tool("kiln", "-m " + out + " -p 'To be' -n 4 --temp 0");
    INFO(generate.err);
    CHECK(generate.status == 0);
}

TEST_CASE("kiln-train: bad input gives one clear line and keeps what was there", "[train][cli]") {
    TempDir dir("kiln-train-bad");
    const fs::path text = small_text(dir);
    const std::string out = " -o " + test::shell_quote((dir.path / "m.gguf").string()) + " ";
    const std::string t = "-f " + test::shell_quote(text.string());

    write(dir.path / "empty.txt", "");
    auto r = test::run_tool("kiln-train", "-f " + test::shell_quote((dir.path / "empty.txt").string()) + out + kSmall);
    CHECK(r.status == 1);
    CHECK(r.err == "kiln-train: [corpus] the text is empty\n");

    write(dir.path / "tiny.txt", "To be, or not to be");
    r = test::run_tool("kiln-train", "-f " + test::shell_quote((dir.path / "tiny.txt").string()) + out + kSmall);
    CHECK(r.status == 1);
    CHECK(r.err.find("too few for context 16") != std::string::npos);

    r = test::run_tool("kiln-train", t + out + "--width 10 --heads 3");
    CHECK(r.status == 2);
    CHECK(r.err.find("--width 10 is not divisible by --heads 3") != std::string::npos);

    r = test::run_tool("kiln-train", "-f " + test::shell_quote((dir.path / "missing.txt").string()) + out);
    CHECK(r.status == 1);
    CHECK(r.err.find("cannot open") != std::string::npos);

    // The Llama's flags: for --arch llama only, and heads that share key/value heads evenly.
    r = test::run_tool("kiln-train", t + out + "--vocab x.gguf");
    CHECK(r.status == 2);
    CHECK(r.err.find("--vocab is only for --arch llama") != std::string::npos);
    r = test::run_tool("kiln-train", t + out + "--arch llama --bias");
    CHECK(r.status == 2);
    CHECK(r.err.find("--bias is only for --arch gpt2") != std::string::npos);
    r = test::run_tool("kiln-train", t + out + "--arch llama --heads 4 --kv-heads 3");
    CHECK(r.status == 2);
    CHECK(r.err.find("--heads 4 is not a multiple of --kv-heads 3") != std::string::npos);
    r = test::run_tool("kiln-train", t + out + "--arch mamba");
    CHECK(r.status == 2);
    CHECK(r.err.find("--arch must be gpt2 or llama") != std::string::npos);
    // A gpt2 checkpoint does not resume a llama (and the other way round).
    REQUIRE(test::run_tool("kiln-train", t + " -o " + test::shell_quote((dir.path / "g.gguf").string()) + " " + kSmall +
                                             " --iters 2").status == 0);
    r = test::run_tool("kiln-train", t + out + kSmall + " --arch llama --iters 4 --resume " +
                                         test::shell_quote((dir.path / "g.ckpt.gguf").string()));
    CHECK(r.status == 1);
    CHECK(r.err.find("architecture 'gpt2' is not llama") != std::string::npos);

    write(dir.path / "corrupt.gguf", "GGUF this is not a checkpoint");
    r = test::run_tool("kiln-train", t + out + kSmall + " --iters 4 --resume " + test::shell_quote((dir.path / "corrupt.gguf").string()));
    CHECK(r.status == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(!fs::exists(dir.path / "m.gguf"));

    // A model is not a checkpoint.
    REQUIRE(test::run_tool("kiln-train", t + out + kSmall + " --iters 2").status == 0);
    r = test::run_tool("kiln-train", t + out + kSmall + " --iters 4 --resume " + test::shell_quote((dir.path / "m.gguf").string()));
    CHECK(r.status == 1);
    CHECK(r.err.find("not a training checkpoint") != std::string::npos);

    // A checkpoint whose weights hold an infinity is refused when it is read,
    // before a step runs; the checkpoint is untouched. (A step whose loss is
    // NaN: tests/test_train_outputs.cpp.)
    auto ckpt = train::read_gpt_checkpoint(dir.path / "m.ckpt.gguf");
    REQUIRE(ckpt.training);
    train::GptModel poisoned(ckpt.config);
    poisoned.data() = ckpt.data;
    poisoned.data()[0] = std::numeric_limits<float>::infinity();
    const fs::path bad = dir.path / "bad.ckpt.gguf";
    train::write_gpt_model(bad, poisoned, ckpt.vocabulary, DType::F32, &*ckpt.training);
    const std::string before = slurp(bad);
    r = test::run_tool("kiln-train", t + " -o " + test::shell_quote((dir.path / "n.gguf").string()) + " " + kSmall +
                                         " --iters 6 --resume " + test::shell_quote(bad.string()) + " --checkpoint " +
                                         test::shell_quote(bad.string()));
    CHECK(r.status == 1);
    INFO(r.err);
    CHECK(r.err.find("holds inf at element 0: the checkpoint is damaged") != std::string::npos);
    CHECK(slurp(bad) == before);
    CHECK(!fs::exists(dir.path / "n.gguf"));
}

TEST_CASE("kiln-train --task reverse writes a transformer GGUF and reports held-out exact match", "[train][cli]") {
    TempDir dir("kiln-train-reverse");
    const std::string out = test::shell_quote((dir.path / "r.gguf").string());
    const auto r = test::run_tool("kiln-train", "--task reverse -o " + out +
                                                    " --max-length 3 --held-out 20 --layers 1 --heads 2 --width 16 "
                                                    "--batch 8 --iters 20 --warmup 2 --eval-interval 10 -t 2");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find("step 20: loss") != std::string::npos);
    CHECK(r.err.find("held-out exact match") != std::string::npos);
    const GgufFile model = GgufFile::open(dir.path / "r.gguf");
    CHECK(model.get_string("general.architecture") == "transformer");
    CHECK(model.get_int("tokenizer.ggml.bos_token_id") == 1);
    CHECK(model.get_int("tokenizer.ggml.eos_token_id") == 2);
    CHECK(model.get_tensor("dec.blk.0.cross_attn_q.weight").dims == std::vector<uint64_t>{16, 16});
    CHECK(model.find_tensor("output.weight") == nullptr);  // tied

    const std::string csv = slurp(dir.path / "r.csv");
    CHECK(csv.starts_with("step,loss,lr,grad_norm,tokens_per_s,eval_train_loss,eval_val_loss,greedy_exact_match,"
                          "beam_exact_match\n"));
    // The loss chart, drawn beside the CSV (its pixels: tests/test_viz_cli.cpp).
    const std::optional<test::PngSize> chart = test::png_size(dir.path / "r.png");
    REQUIRE(chart);
    CHECK(chart->width == 900);
    CHECK(chart->height == 540);
    CHECK(r.err.find("with 4 beams") != std::string::npos);

    const auto both = test::run_tool("kiln-train", "--task reverse -f x.txt -o " + out);
    CHECK(both.status == 2);
    CHECK(both.err.find("exclude each other") != std::string::npos);
    const auto text_flag = test::run_tool("kiln-train", "--task reverse --accumulation 2 -o " + out);
    CHECK(text_flag.status == 2);
    CHECK(text_flag.err.find("--accumulation is only for a text (-f)") != std::string::npos);
    const auto task_flag = test::run_tool("kiln-train", "-f x.txt --eval-beams 2 -o " + out);
    CHECK(task_flag.status == 2);
    CHECK(task_flag.err.find("--eval-beams is only for --task reverse") != std::string::npos);
    const auto other = test::run_tool("kiln-train", "--task sort -o " + out);
    CHECK(other.status == 2);
    CHECK(other.err.find("--task must be 'reverse'") != std::string::npos);
}

TEST_CASE("kiln-train --task reverse: 8 steps equal 4 steps, --resume, 4 more", "[train][cli]") {
    TempDir dir("kiln-train-reverse-resume");
    const std::string flags = " --max-length 4 --held-out 10 --layers 1 --heads 2 --width 16 --batch 6 --warmup 2 "
                              "--decay-iters 8 --eval-interval 4 --eval-beams 3 --dropout 0.1 -t 2";
    const auto at = [&](const char* name) { return test::shell_quote((dir.path / name).string()); };
    const auto whole = test::run_tool("kiln-train", "--task reverse -o " + at("a.gguf") + " --iters 8" + flags);
    INFO(whole.err);
    REQUIRE(whole.status == 0);
    const auto first = test::run_tool("kiln-train", "--task reverse -o " + at("b.gguf") + " --iters 4" + flags);
    INFO(first.err);
    REQUIRE(first.status == 0);
    const auto second = test::run_tool("kiln-train", "--task reverse -o " + at("b.gguf") + " --iters 8" + flags +
                                                         " --resume " + at("b.ckpt.gguf"));
    INFO(second.err);
    REQUIRE(second.status == 0);
    CHECK(second.err.find("resuming at step 4") != std::string::npos);
    check_resumed_run_equals_uninterrupted(dir.path);
    // Both evaluations (steps 4 and 8) are in the log, with their exact match.
    std::istringstream rows(slurp(dir.path / "a.csv"));
    std::string row;
    std::vector<std::string> evaluated;
    while (std::getline(rows, row))
        if (!row.ends_with(",")) evaluated.push_back(row.substr(0, row.find(',')));
    CHECK(evaluated == std::vector<std::string>{"step", "4", "8"});
    const auto checkpoint = train::read_seq2seq_checkpoint(dir.path / "a.ckpt.gguf");
    REQUIRE(checkpoint.training);
    CHECK(checkpoint.training->step == 8);
    CHECK(!train::read_seq2seq_checkpoint(dir.path / "a.gguf").training);
}

TEST_CASE("kiln-train --task reverse --resume: bad checkpoints give one clear line", "[train][cli]") {
    TempDir dir("kiln-train-reverse-bad");
    const std::string flags = " --max-length 3 --held-out 5 --layers 1 --heads 2 --width 16 --batch 4 --warmup 1 -t 2";
    const auto at = [&](const char* name) { return test::shell_quote((dir.path / name).string()); };
    REQUIRE(test::run_tool("kiln-train", "--task reverse -o " + at("m.gguf") + " --iters 2" + flags).status == 0);
    const auto resume = [&](const char* checkpoint, const std::string& more = "") {
        return test::run_tool("kiln-train", "--task reverse -o " + at("n.gguf") + " --iters 4" + flags + more +
                                                " --resume " + at(checkpoint));
    };
    const auto one_line = [](const test::ToolRun& r, const std::string& words) {
        INFO(r.err);
        CHECK(r.status == 1);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(r.err.find(words) != std::string::npos);
    };

    write(dir.path / "corrupt.gguf", "GGUF this is not a checkpoint");
    one_line(resume("corrupt.gguf"), "kiln-train: ");
    // Cut short: the tensors run past the end of the file.
    const std::string whole = slurp(dir.path / "m.ckpt.gguf");
    write(dir.path / "short.gguf", whole.substr(0, whole.size() / 2));
    one_line(resume("short.gguf"), "kiln-train: ");
    one_line(resume("m.gguf"), "not a training checkpoint");
    one_line(resume("m.ckpt.gguf", " --width 32"), "is not this one");
    // A text model's checkpoint.
    const fs::path text = small_text(dir);
    REQUIRE(test::run_tool("kiln-train", "-f " + test::shell_quote(text.string()) + " -o " + at("g.gguf") + " --iters 2 " +
                                             kSmall).status == 0);
    one_line(resume("g.ckpt.gguf"), "is not transformer");
    CHECK(!fs::exists(dir.path / "n.gguf"));
}
