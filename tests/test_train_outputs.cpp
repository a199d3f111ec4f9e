// kiln-train's output paths and checkpoints under hostile conditions: a wrong
// -o fails before any work and writes nothing beside it; a long but valid
// name works; a damaged checkpoint (flipped bytes, NaN optimizer state) is
// refused when resumed; a failed step names a checkpoint that exists.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "engine/train/gpt_gguf.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
namespace fs = std::filesystem;
using test::shell_quote;

namespace {

std::string q(const fs::path& p) { return shell_quote(p.string()); }

// A small model so that a run takes a fraction of a second.
const std::string kSmall = " --layers 1 --heads 2 --width 16 --context 16 --batch 3 --warmup 0 --eval-batches 1 -t 1";

fs::path small_text(const fs::path& dir) {
    const auto all = test::read_file(test::shared_dir() / "data" / "tinyshakespeare.txt");
    REQUIRE(all.size() > 5000);
    const fs::path p = dir / "text.txt";
    test::write_file(p, std::span(all).first(5000));
    return p;
}

std::set<std::string> names_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

test::ToolRun run_train(const std::string& args) { return test::run_tool("kiln-train", args, "timeout 60"); }

void require_one_line(const test::ToolRun& run, int status, std::string_view fragment) {
    INFO("stderr: " << run.err);
    CHECK(run.status == status);
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fragment) != std::string::npos);
}

}  // namespace

TEST_CASE("kiln-train refuses a wrong -o before training and writes nothing beside it", "[train][cli][hostile]") {
    test::TempDir dir;
    const fs::path text = small_text(dir.path());
    // --iters 100000: were the path checked only at the first checkpoint, this would run out the timeout.
    const std::string args = "-f " + q(text) + kSmall + " --iters 100000 --eval-interval 100000";

    require_one_line(run_train(args + " -o " + q(dir.path() / "missing" / "m.gguf")), 1, "does not exist");
    fs::create_directory(dir.path() / "out.gguf");
    require_one_line(run_train(args + " -o " + q(dir.path() / "out.gguf")), 1, "is a directory");
    require_one_line(run_train(args + " -o " + q(dir.path() / "m.gguf") + " --checkpoint " + q(dir.path() / "out.gguf")), 1,
                     "--checkpoint '" + (dir.path() / "out.gguf").string() + "' is a directory");
    require_one_line(run_train(args + " -o " + q(dir.path() / "nested") + "/"), 1, "names a folder");
    // No stray out.csv / out.png / m.ckpt.gguf beside the directory, nothing inside it.
    CHECK(names_in(dir.path()) == std::set<std::string>{"text.txt", "out.gguf"});
    CHECK(fs::is_empty(dir.path() / "out.gguf"));
}

TEST_CASE("kiln-train writes a valid 245-character output name and its longer siblings", "[train][cli][hostile]") {
    test::TempDir dir;
    const fs::path text = small_text(dir.path());
    // 245 bytes with ".gguf"; the checkpoint's name is 250, its temporary file's would be 272.
    const std::string name = std::string(240, 'm') + ".gguf";
    const auto run = run_train("-f " + q(text) + kSmall + " --iters 2 --eval-interval 2 -o " + q(dir.path() / name));
    INFO(run.err);
    REQUIRE(run.status == 0);
    const std::string stem(240, 'm');
    CHECK(names_in(dir.path()) ==
          std::set<std::string>{"text.txt", name, stem + ".ckpt.gguf", stem + ".csv", stem + ".png"});
    CHECK(GgufFile::open(dir.path() / name).get_string("general.architecture") == "gpt2");
}

TEST_CASE("a checkpoint with flipped bytes is refused by its checksum", "[train][cli][hostile]") {
    test::TempDir dir;
    const fs::path text = small_text(dir.path());
    const std::string common = "-f " + q(text) + kSmall + " --eval-interval 2 -o " + q(dir.path() / "m.gguf");
    REQUIRE(run_train(common + " --iters 2").status == 0);
    const fs::path ckpt = dir.path() / "m.ckpt.gguf";
    auto bytes = test::read_file(ckpt);
    const GgufFile parsed = GgufFile::parse(bytes, "checkpoint");
    REQUIRE(parsed.find("kiln.checksum.tensor_data_crc32") != nullptr);
    // 16 bytes in the middle of the data: weights or moments, which still parse as floats.
    const size_t at = parsed.data_offset() + (bytes.size() - parsed.data_offset()) / 2;
    for (size_t i = 0; i < 16; ++i) bytes[at + i] ^= std::byte{0x10};
    test::write_file(ckpt, bytes);
    const auto run = run_train(common + " --iters 4 --resume " + q(ckpt));
    require_one_line(run, 1, "the tensor data does not match its checksum");
}

TEST_CASE("a checkpoint with NaN optimizer state is refused before a step runs", "[train][cli][hostile]") {
    test::TempDir dir;
    const fs::path text = small_text(dir.path());
    const std::string common = "-f " + q(text) + kSmall + " --eval-interval 2 -o " + q(dir.path() / "m.gguf");
    REQUIRE(run_train(common + " --iters 2").status == 0);
    auto ckpt = train::read_gpt_checkpoint(dir.path() / "m.ckpt.gguf");
    REQUIRE(ckpt.training);
    train::GptModel model(ckpt.config);
    model.data() = ckpt.data;
    train::TrainingState state = *ckpt.training;
    state.adam_v[3] = std::numeric_limits<float>::quiet_NaN();
    const fs::path bad = dir.path() / "bad.ckpt.gguf";
    train::write_gpt_model(bad, model, ckpt.vocabulary, DType::F32, &state);
    const auto run = run_train(common + " --iters 4 --resume " + q(bad));
    require_one_line(run, 1, "holds nan at element 3: the checkpoint is damaged");
    CHECK(run.err.find("tensor adam_v.") != std::string::npos);
}

TEST_CASE("a failed step names the checkpoint it resumed from, not one never written", "[train][cli][hostile]") {
    test::TempDir dir;
    const fs::path text = small_text(dir.path());
    const std::string common = "-f " + q(text) + kSmall + " --eval-interval 2 -o " + q(dir.path() / "m.gguf");
    REQUIRE(run_train(common + " --iters 2").status == 0);
    // Finite but huge weights: the checkpoint loads, the first step's loss overflows to NaN.
    auto ckpt = train::read_gpt_checkpoint(dir.path() / "m.ckpt.gguf");
    REQUIRE(ckpt.training);
    train::GptModel model(ckpt.config);
    model.data() = ckpt.data;
    std::fill(model.data().begin(), model.data().end(), 3e38f);
    const fs::path huge = dir.path() / "huge.ckpt.gguf";
    train::write_gpt_model(huge, model, ckpt.vocabulary, DType::F32, &*ckpt.training);
    const fs::path fresh = dir.path() / "never-written.ckpt.gguf";
    const auto run = run_train("-f " + q(text) + kSmall + " --eval-interval 2 -o " + q(dir.path() / "n.gguf") +
                           " --iters 4 --resume " + q(huge) + " --checkpoint " + q(fresh));
    INFO("stderr: " << run.err);
    CHECK(run.status == 1);
    // The progress line comes first; the error is the last line.
    const std::string last_line = run.err.substr(run.err.rfind('\n', run.err.size() - 2) + 1);
    CHECK(last_line.find("the loss is nan") != std::string::npos);
    CHECK(last_line.find("The last good checkpoint is " + huge.string() + " (step 2).") != std::string::npos);
    CHECK_FALSE(fs::exists(fresh));
    CHECK_FALSE(fs::exists(dir.path() / "n.gguf"));
    CHECK_FALSE(fs::exists(dir.path() / "n.csv"));  // a failed run leaves no new log
    CHECK_FALSE(fs::exists(dir.path() / "n.png"));
}
