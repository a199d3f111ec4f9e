// kiln-server's scheduler in-process: requests batched together, queued,
// chunked or cancelled give what each gives alone, computed here by a plain
// greedy loop over one session (the path tests/test_family_llamacpp.cpp holds
// against llama.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/paths.h"
#include "tools/server/slot_scheduler.h"

using namespace kiln;
using namespace kiln::server;

namespace {

struct Model {
    std::shared_ptr<const GgufFile> file;
    std::unique_ptr<CausalLm> lm;
    std::unique_ptr<Tokenizer> tokenizer;
};

const Model& stories() {
    static const Model model = [] {
        Model m;
        m.file = std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
        m.lm = load_causal_lm(m.file);
        m.tokenizer = load_tokenizer(*m.file);
        return m;
    }();
    return model;
}

std::vector<int32_t> prompt_of(const std::string& text) {
    return stories().tokenizer->encode(text, stories().tokenizer->prompt_options());
}

// The greedy continuation by one session, token by token.
std::vector<int32_t> greedy_alone(const std::vector<int32_t>& prompt, int64_t max_tokens, int64_t n_ctx) {
    const Model& m = stories();
    ThreadPool pool(1);
    auto session = m.lm->new_session(n_ctx, 1);
    std::span<const float> logits = session->eval(prompt, pool);
    std::vector<int32_t> out;
    while (static_cast<int64_t>(out.size()) < max_tokens) {
        const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (m.tokenizer->is_eog(id)) break;
        out.push_back(id);
        if (session->n_past() == n_ctx) break;
        logits = session->eval(std::span(&out.back(), 1), pool);
    }
    return out;
}

GenerationParams greedy(int64_t max_tokens) {
    GenerationParams p;
    p.sampling.temperature = 0;
    p.max_tokens = max_tokens;
    p.top_logprobs = 0;  // the events then carry each token's id
    return p;
}

struct Result {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    GenerationEvent last;
};

Result collect(RequestChannel& channel) {
    Result r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        auto e = channel.next(std::chrono::milliseconds(200));
        if (!e) continue;
        r.text += e->text;
        for (const TokenLogprob& t : e->tokens) {
            r.tokens.push_back(t.id);
            r.logprobs.push_back(t.logprob);
        }
        if (e->done) {
            r.last = *e;
            return r;
        }
    }
    FAIL("the request did not finish within 60 s");
    return r;
}

SchedulerConfig config(int64_t slots, int64_t n_ctx, int64_t n_batch) {
    SchedulerConfig c;
    c.n_slots = slots;
    c.n_ctx_per_slot = n_ctx;
    c.n_batch = n_batch;
    c.threads = 2;
    return c;
}

bool all_idle(const SlotScheduler& s) {
    for (int i = 0; i < 100; ++i) {
        const auto slots = s.slots();
        if (std::none_of(slots.begin(), slots.end(), [](const SlotStatus& st) { return st.busy; })) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

const std::vector<std::string> kPrompts{"Once upon a time", "Lily had a big red ball. One day", "The cat",
                                        "Tom and his mom went to the park to play. They saw a big tree and",
                                        "One day, a little bird", "Sara"};

}  // namespace

TEST_CASE("requests batched, queued and chunked give the tokens each gives alone", "[server]") {
    const Model& m = stories();
    const int64_t n_ctx = 96, max_tokens = 40;
    // Four slots for six requests (two wait in the queue), and prompts taken
    // three tokens a step, so prompt chunks and replies share steps.
    const auto n_batch = GENERATE(int64_t{3}, int64_t{512});
    SlotScheduler scheduler(*m.lm, *m.tokenizer, config(4, n_ctx, n_batch));
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const std::string& p : kPrompts) channels.push_back(scheduler.submit(prompt_of(p), greedy(max_tokens)));
    SlotScheduler alone(*m.lm, *m.tokenizer, config(1, n_ctx, 512));
    float worst = 0;
    for (size_t i = 0; i < kPrompts.size(); ++i) {
        INFO(kPrompts[i]);
        const Result batched = collect(*channels[i]);
        const std::vector<int32_t> expected = greedy_alone(prompt_of(kPrompts[i]), max_tokens, n_ctx);
        CHECK(batched.tokens == expected);
        CHECK(batched.last.completion_tokens == static_cast<int64_t>(expected.size()));
        CHECK(batched.last.prompt_tokens == static_cast<int64_t>(prompt_of(kPrompts[i]).size()));
        CHECK(batched.text == m.tokenizer->decode(expected, false));
        // The same request alone in the scheduler: log-probabilities of the
        // same tokens from batches of another composition.
        const Result single = collect(*alone.submit(prompt_of(kPrompts[i]), greedy(max_tokens)));
        REQUIRE(single.tokens == batched.tokens);
        for (size_t t = 0; t < single.logprobs.size(); ++t)
            worst = std::max(worst, std::abs(single.logprobs[t] - batched.logprobs[t]));
    }
    // Not bit-identical: a batch of several rows takes other matmul paths than
    // one row (measured: about 3e-6 on stories260K), so only the greedy tokens
    // are compared exactly; the tolerance is test_sequence_slots' 1e-4.
    WARN("largest log-probability difference, batched vs alone (n_batch " << n_batch << "): " << worst);
    CHECK(worst <= 1e-4f);
    CHECK(all_idle(scheduler));
}

// A reply sent whole waits for its final event only: the partial events
// before it are merged into the one it gets, and without the final event it
// gets nothing (the caller then checks its connection and waits again).
TEST_CASE("next_final merges every event up to the final one, and only once it is in", "[server]") {
    RequestChannel channel;
    GenerationEvent a, b, last;
    a.text = "Once";
    b.text = " upon";
    last.text = " a time";
    last.done = true;
    last.finish = FinishReason::Length;
    last.completion_tokens = 3;
    channel.push(a);
    channel.push(b);
    CHECK_FALSE(channel.next_final(std::chrono::milliseconds(20)).has_value());
    channel.push(last);
    const std::optional<GenerationEvent> got = channel.next_final(std::chrono::milliseconds(1000));
    REQUIRE(got.has_value());
    CHECK(got->text == "Once upon a time");
    CHECK(got->done);
    CHECK(got->finish == FinishReason::Length);
    CHECK(got->completion_tokens == 3);
    // The same channel as a stream would read it: one event at a time.
    RequestChannel stream;
    stream.push(a);
    const std::optional<GenerationEvent> first = stream.next(std::chrono::milliseconds(1000));
    REQUIRE(first.has_value());
    CHECK(first->text == "Once");
    CHECK_FALSE(first->done);
}

// A short new prompt is evaluated alone (its first token after one small
// step), never twice in a row (replies advance at least every second step);
// a long one is chunked in beside the replies.
TEST_CASE("short prompts run alone, ahead of the replies, never two steps in a row", "[server]") {
    CHECK(prompts_run_alone(2, 4, false));
    CHECK(prompts_run_alone(12, 4, false));    // n_slots + 8 tokens: still one small step
    CHECK_FALSE(prompts_run_alone(13, 4, false));
    CHECK_FALSE(prompts_run_alone(2, 4, true));  // the step before was one
    CHECK_FALSE(prompts_run_alone(0, 4, false)); // no prompt waiting
    CHECK(prompts_run_alone(9, 1, false));
    CHECK_FALSE(prompts_run_alone(10, 1, false));
}

TEST_CASE("a request reuses the longest cached prefix of an idle slot", "[server]") {
    const Model& m = stories();
    SlotScheduler scheduler(*m.lm, *m.tokenizer, config(2, 96, 512));
    const std::vector<int32_t> prompt = prompt_of(kPrompts[3]);
    const Result first = collect(*scheduler.submit(prompt, greedy(8)));
    CHECK(first.last.cached_tokens == 0);
    // The same prompt again: all but its last token come from the cache.
    const Result again = collect(*scheduler.submit(prompt, greedy(8)));
    CHECK(again.last.cached_tokens == static_cast<int64_t>(prompt.size()) - 1);
    CHECK(again.tokens == first.tokens);
    // A prompt sharing its first five tokens, then other words.
    std::vector<int32_t> other(prompt.begin(), prompt.begin() + 5);
    for (int32_t t : prompt_of(" a dog ran")) if (t != m.tokenizer->bos()) other.push_back(t);
    const Result third = collect(*scheduler.submit(other, greedy(8)));
    CHECK(third.last.cached_tokens == 5);
    CHECK(third.tokens == greedy_alone(other, 8, 96));
}

TEST_CASE("a reply ends at max_tokens, at the slot's context, at a stop string", "[server]") {
    const Model& m = stories();
    const int64_t n_ctx = 24;
    SlotScheduler scheduler(*m.lm, *m.tokenizer, config(2, n_ctx, 512));
    const std::vector<int32_t> prompt = prompt_of(kPrompts[0]);

    const Result five = collect(*scheduler.submit(prompt, greedy(5)));
    CHECK(five.last.finish == FinishReason::Length);
    CHECK(five.tokens.size() == 5);

    // The last reply token needs no cache row: the prompt and reply fill n_ctx + 1 positions.
    const Result full = collect(*scheduler.submit(prompt, greedy(-1)));
    const std::vector<int32_t> expected = greedy_alone(prompt, 1000, n_ctx);
    REQUIRE(expected.size() == n_ctx + 1 - prompt.size());  // this prompt meets no end-of-text before
    CHECK(full.tokens == expected);
    CHECK(full.last.finish == FinishReason::Length);

    // Stop at a piece of the reply: the text before it, and finish "stop".
    const std::string whole = full.text;
    const size_t cut = whole.find(' ', whole.size() / 2);
    REQUIRE(cut != std::string::npos);
    const std::string stop = whole.substr(cut, 4);
    GenerationParams p = greedy(-1);
    p.stop = {"never appears", stop};
    const Result stopped = collect(*scheduler.submit(prompt, p));
    CHECK(stopped.last.finish == FinishReason::Stop);
    CHECK(stopped.text == whole.substr(0, whole.find(stop)));
    CHECK(all_idle(scheduler));
}

TEST_CASE("a cancelled request frees its slot for the next one", "[server]") {
    const Model& m = stories();
    SlotScheduler scheduler(*m.lm, *m.tokenizer, config(1, 512, 512));
    auto running = scheduler.submit(prompt_of(kPrompts[0]), greedy(-1));
    auto waiting = scheduler.submit(prompt_of(kPrompts[2]), greedy(6));
    REQUIRE(running->next(std::chrono::seconds(30)).has_value());  // it is generating
    running->cancel();
    const Result next = collect(*waiting);
    CHECK(next.tokens == greedy_alone(prompt_of(kPrompts[2]), 6, 512));
    CHECK(all_idle(scheduler));
}

TEST_CASE("stopping the scheduler ends running and queued requests with an error", "[server]") {
    const Model& m = stories();
    SlotScheduler scheduler(*m.lm, *m.tokenizer, config(1, 512, 512));
    auto running = scheduler.submit(prompt_of(kPrompts[0]), greedy(-1));
    auto waiting = scheduler.submit(prompt_of(kPrompts[1]), greedy(-1));
    REQUIRE(running->next(std::chrono::seconds(30)).has_value());
    scheduler.stop();
    const Result a = collect(*running), b = collect(*waiting);
    CHECK(a.last.finish == FinishReason::Error);
    CHECK(b.last.finish == FinishReason::Error);
    CHECK(b.last.error == "the server is shutting down");
    const Result late = collect(*scheduler.submit(prompt_of(kPrompts[2]), greedy(3)));
    CHECK(late.last.finish == FinishReason::Error);
    CHECK_THROWS_WITH(scheduler.submit(std::vector<int32_t>(513, 1), greedy(1)), Catch::Contains("more than a slot's context"));
}
