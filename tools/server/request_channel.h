#pragma once
// What one request asks of the engine and what comes back: the engine thread
// pushes events (text as it becomes safe to show, then a final event with the
// finish reason and token counts); the HTTP thread serving the request waits
// on them, and cancels the request when its client goes away.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/sampler.h"

namespace kiln::server {

struct GenerationParams {
    SamplerParams sampling;
    int64_t max_tokens = -1;  // -1: until the slot's context is full
    std::vector<std::string> stop;
    int top_logprobs = -1;    // -1: no log-probabilities; 0..20: the chosen token's and this many alternatives
    bool ignore_eos = false;  // llama-server's: end-of-generation tokens are never sampled
};

enum class FinishReason { Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);

// One generated token's log-probability (log-softmax of the model's logits,
// before temperature and filtering, as OpenAI reports them) and the best
// alternatives.
struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
};

struct GenerationEvent {
    std::string text;                  // new reply text (whole UTF-8 characters, no stop string)
    std::vector<TokenLogprob> tokens;  // tokens generated since the last event (with top_logprobs >= 0)
    bool done = false;
    FinishReason finish = FinishReason::Stop;
    std::string error;                 // with FinishReason::Error
    int64_t prompt_tokens = 0;         // on the final event
    int64_t cached_tokens = 0;         // prompt tokens found in the slot's cache, not evaluated again
    int64_t completion_tokens = 0;
    std::string stop_word;             // on the final event: the stop string that ended the reply, if one did
};

class RequestChannel {
public:
    // Engine side.
    void push(GenerationEvent event);
    bool cancelled() const;

    // HTTP side: the next event, or nothing after `timeout` (so the caller can
    // check its connection). Events pushed meanwhile are merged into one.
    std::optional<GenerationEvent> next(std::chrono::milliseconds timeout);
    // HTTP side, for a reply sent whole: every event up to the final one,
    // merged, once the final one is in; nothing after `timeout`. From the
    // first call on, the engine wakes this thread for the final event only:
    // a wake-up per token (each a context switch onto a core the engine's
    // threads are using) cost a small model's 4 batched replies 30% of their
    // speed on a 2-core machine.
    std::optional<GenerationEvent> next_final(std::chrono::milliseconds timeout);
    void cancel();

private:
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<GenerationEvent> events_;
    bool cancelled_ = false;
    bool final_only_ = false;  // the consumer waits for the final event alone (next_final)

    GenerationEvent take_merged();  // with mutex_ held and events_ not empty
};

}  // namespace kiln::server
