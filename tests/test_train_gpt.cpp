// The GPT trainer against PyTorch (tests/reference/make_train_fixtures.py):
// loss and every parameter's gradient for one batch, and the parameters after
// 3 AdamW steps; plus the schedule and the character corpus.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <cstring>

#include "engine/train/char_corpus.h"
#include "engine/train/gpt_trainer.h"
#include "engine/train/schedule.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/torch_training.h"

using namespace kiln;
using namespace kiln::train;

namespace {

std::vector<int32_t> ints(const GgufTensor& t) {
    std::vector<int32_t> v(t.elements);
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(int32_t));
    return v;
}

}  // namespace

TEST_CASE("a tiny GPT's loss, gradients and AdamW steps match PyTorch", "[train]") {
    const GgufFile f = GgufFile::open(test::fixtures_dir() / "train" / "tiny_gpt_reference.gguf");
    TrainOptions o;
    o.model.vocab = f.get_int("test.vocab");
    o.model.context = f.get_int("gpt2.context_length");
    o.model.width = f.get_int("gpt2.embedding_length");
    o.model.ffn = f.get_int("gpt2.feed_forward_length");
    o.model.layers = f.get_int("gpt2.block_count");
    o.model.heads = f.get_int("gpt2.attention.head_count");
    o.model.eps = static_cast<float>(f.get_number("gpt2.attention.layer_norm_epsilon"));
    o.model.bias = true;
    o.batch = f.get_int("test.batch");
    const double lr = f.get_number("test.adam.lr");
    o.schedule = LrSchedule{lr, lr, 0, 1000};  // constant
    o.adam.beta1 = static_cast<float>(f.get_number("test.adam.beta1"));
    o.adam.beta2 = static_cast<float>(f.get_number("test.adam.beta2"));
    o.adam.eps = static_cast<float>(f.get_number("test.adam.eps"));
    o.adam.weight_decay = static_cast<float>(f.get_number("test.adam.weight_decay"));
    o.grad_clip = static_cast<float>(f.get_number("test.adam.clip"));

    ThreadPool pool(3);
    GptTrainer trainer(o, pool);
    GptModel& model = trainer.model();
    for (const ParamTensor& t : model.tensors()) {
        const GgufTensor& src = f.get_tensor(t.name);
        REQUIRE(src.dims == t.dims);
        std::memcpy(model.tensor(t.name), src.data.data(), t.segment.count * sizeof(float));
    }
    const auto tokens = ints(f.get_tensor("tokens"));
    const auto targets = ints(f.get_tensor("targets"));
    const StepResult first = trainer.step_on(tokens, targets);
    CHECK(first.loss == Approx(f.get_number("test.loss")).epsilon(1e-5));

    WARN("largest relative gradient difference "
         << test::require_gradients_match(f, model, trainer.gradients(), 1e-2));

    const GgufValue* losses = f.find("test.adam.losses");
    REQUIRE(losses != nullptr);
    for (int s = 1; s < 3; ++s) {
        const StepResult r = trainer.step_on(tokens, targets);
        CHECK(r.loss == Approx(*losses->as_array()->items[static_cast<size_t>(s)].as_number()).epsilon(1e-5));
    }
    // The key biases' gradients are exactly 0 (adding a constant to every key
    // shifts all scores of a row equally): their Adam steps are not compared.
    const auto [skipped, total] = test::require_adam_steps_match(f, model);
    CHECK(skipped >= static_cast<size_t>(o.model.layers * o.model.width));  // the key biases at least
    CHECK(skipped * 50 < total);                                             // and few others (< 2%)
}

TEST_CASE("the learning rate warms up linearly, then decays on a cosine to the minimum", "[train]") {
    const LrSchedule s{1e-3, 1e-4, 100, 2000};
    CHECK(s.at(0) == Approx(1e-3 / 101));
    CHECK(s.at(99) == Approx(1e-3 * 100 / 101));
    CHECK(s.at(100) == Approx(1e-3));
    CHECK(s.at(1050) == Approx(0.5 * (1e-3 + 1e-4)));  // the middle of the cosine
    CHECK(s.at(2000) == Approx(1e-4));
    CHECK(s.at(5000) == Approx(1e-4));
}

TEST_CASE("the character corpus: vocabulary by code point, 90/10 split, windows", "[train]") {
    const std::string text = "ba\xC3\xA9" "cab\nabcabcabcabcabcabcabcabcabc";  // 'é' sorts after ASCII
    const CharCorpus c = CharCorpus::from_text(text, 2);
    REQUIRE(c.vocabulary.tokens() == std::vector<std::string>{"\n", "a", "b", "c", "\xC3\xA9"});
    CHECK(c.train.size() + c.validation.size() == 34);
    CHECK(c.train.size() == 30);
    CHECK(c.vocabulary.decode(c.train).substr(0, 8) == "ba\xC3\xA9" "cab\n");
    Rng rng(5);
    std::vector<int32_t> in(3 * 2), out(3 * 2);
    sample_windows(c.train, 3, 2, rng, in.data(), out.data());
    for (int b = 0; b < 3; ++b) {
        // Each target is the token after its input: find the window in the data.
        bool found = false;
        for (size_t s = 0; s + 2 < c.train.size(); ++s)
            found = found || (c.train[s] == in[b * 2] && c.train[s + 1] == in[b * 2 + 1] && c.train[s + 1] == out[b * 2] &&
                              c.train[s + 2] == out[b * 2 + 1]);
        CHECK(found);
    }
    CHECK_THROWS_WITH(CharCorpus::from_text("", 4), Catch::Contains("empty"));
    CHECK_THROWS_WITH(CharCorpus::from_text("abcdefghij", 4), Catch::Contains("too few for context 4"));
    CHECK_THROWS_WITH(CharCorpus::from_text("ab\xFF" "cd", 1), Catch::Contains("invalid UTF-8 at byte 2"));
    CHECK_THROWS_WITH(c.vocabulary.encode("abz"), Catch::Contains("U+007A at byte 2"));
}

TEST_CASE("gradient accumulation over 2 micro-batches of 3 equals one batch of 6", "[train]") {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
    const CharCorpus corpus = CharCorpus::from_text(text, 16);
    TrainOptions o;
    o.model = GptConfig{static_cast<int64_t>(corpus.vocabulary.size()), 16, 16, 2, 2, 64, true, 1e-5f};
    o.schedule = LrSchedule{1e-2, 1e-3, 2, 10};
    ThreadPool pool(2);
    o.batch = 6;
    GptTrainer whole(o, pool);
    o.batch = 3;
    o.accumulation = 2;
    GptTrainer split(o, pool);
    for (int s = 0; s < 3; ++s) {
        const StepResult a = whole.step(corpus.train);
        const StepResult b = split.step(corpus.train);
        CHECK(b.loss == Approx(a.loss).epsilon(1e-5));
        CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(1e-4));
        for (size_t i = 0; i < whole.gradients().size(); ++i)
            REQUIRE(split.gradients()[i] == Approx(whole.gradients()[i]).epsilon(1e-3).margin(1e-6));
    }
    for (size_t i = 0; i < whole.model().data().size(); ++i)
        REQUIRE(split.model().data()[i] == Approx(whole.model().data()[i]).epsilon(1e-4).margin(1e-5));
}
