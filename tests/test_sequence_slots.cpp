// Several sequences in one KV cache: a batch mixing slots, and slots taken
// over by others (beam search), must give exactly what separate runs give.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/models/llama.h"
#include "engine/models/sequence_slots.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"

using namespace kiln;

namespace {

std::shared_ptr<const GgufFile> open_model(const std::filesystem::path& path) {
    return std::make_shared<GgufFile>(GgufFile::open(path));
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

std::vector<float> last_logits_alone(const CausalLm& lm, const std::vector<int32_t>& tokens, ThreadPool& pool) {
    auto s = lm.new_session(32, 1, Executor::Mode::Fast);
    const auto l = s->eval(tokens, pool);
    return {l.begin(), l.end()};
}

}  // namespace

TEST_CASE("slot plans keep each token to its own sequence", "[slots]") {
    SequenceSlots slots(1, 4, 3, 5);
    const std::vector<int32_t> batch{2, 0, 2};
    SlotBatch b;
    slots.plan(batch, b);
    CHECK(b.positions == std::vector<int32_t>{0, 0, 1});
    CHECK(b.cache_rows == std::vector<int32_t>{10, 0, 11});
    REQUIRE(b.mask.size() == 15 * 3);
    for (int row = 0; row < 15; ++row) {
        CHECK(b.mask[0 * 15 + row] == (row == 10));
        CHECK(b.mask[1 * 15 + row] == (row == 0));
        CHECK(b.mask[2 * 15 + row] == (row == 10 || row == 11));
    }
    slots.commit(batch);
    CHECK(slots.n_past(2) == 2);
    CHECK(slots.n_past(1) == 0);
    const std::vector<int32_t> too_many{1, 1, 1, 1, 1, 1};
    CHECK_THROWS_WITH(slots.plan(too_many, b), Catch::Contains("do not fit the context"));
    const std::vector<int32_t> bad_slot{3};
    CHECK_THROWS_WITH(slots.plan(bad_slot, b), Catch::Contains("out of range"));
}

TEST_CASE("sequences of different lengths in one batch give the logits of separate runs", "[slots]") {
    const auto path = GENERATE(std::string("llama"), std::string("gpt2"));
    const auto file = open_model(path == "llama" ? test::shared_models_dir() / "stories260K.gguf"
                                                 : test::fixtures_dir() / "gpt2" / "tiny_bias.gguf");
    const auto lm = load_causal_lm(file);
    ThreadPool pool(2);
    const std::vector<std::vector<int32_t>> prompts{{1, 5, 9, 13, 17, 21, 25}, {1, 30}, {1, 2, 3, 4}};
    auto session = lm->new_session(32, 3, Executor::Mode::Fast);
    std::vector<int32_t> tokens, slots;
    for (size_t s = 0; s < prompts.size(); ++s)
        for (int32_t t : prompts[s]) {
            tokens.push_back(t);
            slots.push_back(static_cast<int32_t>(s));
        }
    // Interleave the sequences' tokens, to show the order of a batch does not matter.
    std::vector<size_t> order(tokens.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_partition(order.begin(), order.end(), [&](size_t i) { return slots[i] != 1; });
    std::vector<int32_t> t2, s2;
    for (size_t i : order) {
        t2.push_back(tokens[i]);
        s2.push_back(slots[i]);
    }
    const auto all = session->eval_slots(t2, s2, pool);
    const auto n_vocab = static_cast<size_t>(lm->info().n_vocab);
    for (size_t s = 0; s < prompts.size(); ++s) {
        // the batch row of the sequence's last token
        size_t row = 0;
        for (size_t i = 0; i < s2.size(); ++i)
            if (s2[i] == static_cast<int32_t>(s)) row = i;
        const auto alone = last_logits_alone(*lm, prompts[s], pool);
        CHECK(max_abs_diff(all.subspan(row * n_vocab, n_vocab), alone) < 1e-4f);
        CHECK(session->n_past(static_cast<int64_t>(s)) == static_cast<int64_t>(prompts[s].size()));
    }

    // Slot 0 forks into slots 1 and 2; each continues with its own token.
    const std::vector<int32_t> parents{0, 0, 2};
    session->reorder(parents);
    const std::vector<int32_t> next{40, 41, 42}, next_slots{0, 1, 2};
    const auto step = session->eval_slots(next, next_slots, pool);
    for (size_t s = 0; s < 3; ++s) {
        std::vector<int32_t> seq = prompts[static_cast<size_t>(parents[s])];
        seq.push_back(next[s]);
        CHECK(max_abs_diff(step.subspan(s * n_vocab, n_vocab), last_logits_alone(*lm, seq, pool)) < 1e-4f);
    }
}

TEST_CASE("load_causal_lm names the architectures it knows", "[slots]") {
    std::string supported = "supported: ";
    for (const std::string& name : decoder_architectures()) supported += name + ", ";
    CHECK(supported.starts_with("supported: llama, gpt2, "));
    CHECK_THROWS_WITH(load_causal_lm(open_model(test::fixtures_dir() / "gpt2" / "tiny_expected.gguf")),
                      Catch::Contains(supported + "transformer)"));
}

TEST_CASE("a truncated sequence continues as if only its kept prefix had been evaluated", "[slots]") {
    const auto path = GENERATE(std::string("llama"), std::string("gpt2"));
    const auto file = open_model(path == "llama" ? test::shared_models_dir() / "stories260K.gguf"
                                                 : test::fixtures_dir() / "gpt2" / "tiny_bias.gguf");
    const auto lm = load_causal_lm(file);
    ThreadPool pool(2);
    const auto n_slots = GENERATE(int64_t{1}, int64_t{2});
    auto session = lm->new_session(32, n_slots, Executor::Mode::Fast);
    // A chat turn: the cached reply's last tokens differ from the re-rendered conversation.
    const std::vector<int32_t> cached{1, 5, 9, 13, 17, 21, 25, 29};
    session->eval(cached, pool);
    session->truncate(0, 5);
    CHECK(session->n_past(0) == 5);
    const std::vector<int32_t> rest{40, 41, 42};
    const auto after = session->eval(rest, pool);
    std::vector<int32_t> whole(cached.begin(), cached.begin() + 5);
    whole.insert(whole.end(), rest.begin(), rest.end());
    CHECK(max_abs_diff(after, last_logits_alone(*lm, whole, pool)) < 1e-4f);
    // Keeping more than there is keeps everything.
    session->truncate(0, 100);
    CHECK(session->n_past(0) == 8);
    CHECK_THROWS_WITH(session->truncate(n_slots, 1), Catch::Contains("out of range"));
}
