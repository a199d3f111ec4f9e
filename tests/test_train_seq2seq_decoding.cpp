// The trainer's held-out evaluation of the encoder-decoder: its answers are
// the inference engine's (the same as `kiln --beams K` prints for the written
// model file), and its exact match is right for a model whose answers are
// known from its weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include "engine/runtime/thread_pool.h"
#include "engine/train/seq2seq_gguf.h"
#include "engine/train/seq2seq_trainer.h"
#include "support/run_tool.h"

using namespace kiln;
using namespace kiln::train;
namespace fs = std::filesystem;

namespace {

// The "output: ..." line of kiln's answer.
std::string kiln_output(const fs::path& model, const std::string& text, int beams) {
    const auto r = test::run_tool("kiln", "-m " + test::shell_quote(model.string()) + " -p " + text + " --beams " +
                                              std::to_string(beams) + " -t 1");
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line))
        if (line.starts_with("output: ")) return line.substr(8);
    FAIL("no output line in: " << r.out);
    return {};
}

}  // namespace

TEST_CASE("held-out answers and exact match equal those of kiln --beams K on the written model", "[train][cli]") {
    const ReverseTask task(5, 12, 21);
    Seq2SeqTrainOptions s;
    s.model.width = 32;
    s.model.heads = 2;
    s.model.encoder_layers = s.model.decoder_layers = 1;
    s.model.ffn = 64;
    s.batch = 16;
    s.optimizer.schedule.lr = 3e-3;
    s.optimizer.schedule.min_lr = 3e-4;
    s.optimizer.schedule.warmup = 10;
    s.optimizer.schedule.decay_steps = 300;
    s.seed = 21;
    ThreadPool pool(1);
    Seq2SeqTrainer trainer(s, task, pool);
    // Trained part of the way, so that some answers are wrong and greedy
    // decoding and beam search disagree on some.
    while (trainer.steps_done() < 300) trainer.step();
    const fs::path model = fs::temp_directory_path() / ("kiln-seq2seq-decoding-" + std::to_string(::getpid()) + ".gguf");
    write_seq2seq_model(model, trainer.model(), ReverseTask::model_vocabulary());

    const std::vector<std::string>& texts = task.held_out();
    std::vector<std::vector<std::string>> found;
    for (int beams : {1, 4}) {
        INFO(beams << " beams");
        const std::vector<std::string>& answers = found.emplace_back(trainer.answers(texts, beams));
        size_t right = 0;
        for (size_t i = 0; i < texts.size(); ++i) {
            INFO(texts[i]);
            CHECK(answers[i] == kiln_output(model, texts[i], beams));
            right += answers[i] == std::string(texts[i].rbegin(), texts[i].rend()) ? 1 : 0;
        }
        const HeldOutMatch match = trainer.held_out_match(beams);
        CHECK(match.beam == static_cast<double>(right) / static_cast<double>(texts.size()));
        if (beams == 1) CHECK(match.greedy == match.beam);
        // The run is one where the evaluation can tell right from wrong.
        CHECK(right > 0);
        CHECK(right < texts.size());
    }
    CHECK(found[0] != found[1]);
    // A Q8_0 file: the evaluation decodes the same quantized weights as kiln.
    write_seq2seq_model(model, trainer.model(), ReverseTask::model_vocabulary(), DType::Q8_0);
    const std::vector<std::string> quantized = trainer.answers(texts, 4, DType::Q8_0);
    for (size_t i = 0; i < texts.size(); ++i) CHECK(quantized[i] == kiln_output(model, texts[i], 4));
    fs::remove(model);
}

// A 2-wide pre-LN model whose matrices are all zero adds nothing in any
// sublayer: its final hidden state is LayerNorm(embedding * sqrt(2) + PE(pos)),
// which for two elements is ±(1, -1). With the embedding of 'a' = (0, 0.1)
// and of </s> = (1, 0) (every other token 0), after <s> (PE(0) = (0, 1)) 'a'
// has the largest logit (0.1) and after 'a' (at position 1) </s> has (about
// 1): the model answers "a" to every string, with any number of beams. Of
// the 26 one-letter strings exactly one ("a") is answered right.
TEST_CASE("held-out exact match of a model that answers 'a' to everything", "[train]") {
    const ReverseTask task(1, 26, 5);
    REQUIRE(task.held_out().size() == 26);
    Seq2SeqTrainOptions s;
    s.model.width = 2;
    s.model.heads = 1;
    s.model.encoder_layers = s.model.decoder_layers = 1;
    s.model.ffn = 4;
    s.batch = 4;
    ThreadPool pool(1);
    Seq2SeqTrainer trainer(s, task, pool);
    Seq2SeqModel& m = trainer.model();
    std::fill(m.data().begin(), m.data().end(), 0.0f);
    for (const ParamTensor& t : m.tensors())
        if (t.name.ends_with("norm.weight")) std::fill_n(m.tensor(t.name), t.segment.count, 1.0f);
    float* embedding = m.tensor("token_embd.weight");  // row t = token t's 2 values
    embedding[2 * ReverseTask::kFirstLetter + 1] = 0.1f;
    embedding[2 * ReverseTask::kEos + 0] = 1.0f;
    for (int beams : {1, 3}) {
        const std::vector<std::string> answers = trainer.answers(task.held_out(), beams);
        CHECK(std::all_of(answers.begin(), answers.end(), [](const std::string& a) { return a == "a"; }));
    }
    const HeldOutMatch match = trainer.held_out_match(3);
    CHECK(match.greedy == 1.0 / 26.0);
    CHECK(match.beam == 1.0 / 26.0);
}
