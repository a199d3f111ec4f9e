#pragma once
// Continuous batching: one engine thread owns a CausalSession with n slots and
// advances every running request in one batched evaluation per step. HTTP
// threads submit requests and read their events from a RequestChannel.
//
// A step gathers, for each running slot, either its one newly sampled token
// or its next chunk of prompt (all prompts together at most n_batch tokens a
// step, so a long prompt never stalls the replies that are streaming), runs
// one eval_slots, and samples each slot whose input is complete. Prompts that
// fit a small step in all run alone, ahead of the replies (never two such
// steps in a row), so a new request's first token does not wait for a batch. A request
// joins at the next step; with every slot busy it waits in a FIFO queue.
//
// Prompt reuse: a request takes the idle slot whose cached tokens share the
// longest prefix with its prompt, keeps that prefix (at least one prompt token
// is always evaluated, for its logits) and evaluates only the rest.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/models/causal_lm.h"
#include "engine/runtime/reply_stream.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/thread_pool.h"
#include "formats/tokenizer/tokenizer.h"
#include "tools/server/request_channel.h"

namespace kiln::server {

// How many prompt tokens a step takes, given its `replies` (one token each)
// and `available` prompt tokens (within -b). Each batch size needs a graph
// of its own, built once (which costs as much as many steps) and kept, so
// steps use few sizes: any up to n_slots + 8, then powers of two.
int64_t prompt_tokens_for_step(int64_t replies, int64_t available, int64_t n_slots);

// Whether a step runs the waiting prompts alone, without the streaming
// replies: when all `waiting` prompt tokens fit one small step (up to
// n_slots + 8, a batch size steps use anyway) and the last step was not such
// a step, so that replies still advance at least every second step.
bool prompts_run_alone(int64_t waiting, int64_t n_slots, bool last_step_alone);

struct SchedulerConfig {
    int64_t n_slots = 1;
    int64_t n_ctx_per_slot = 512;
    int64_t n_batch = 512;  // prompt tokens evaluated per step, over all slots
    int threads = 1;
    DType cache_type = DType::F32;
};

struct SlotStatus {
    int64_t id = 0;
    bool busy = false;
    int64_t n_past = 0;  // tokens held in the slot's cache
    int64_t n_ctx = 0;
    int64_t prompt_tokens = 0;
    int64_t generated = 0;
};

class SlotScheduler {
public:
    SlotScheduler(const CausalLm& lm, const Tokenizer& tokenizer, const SchedulerConfig& config);
    ~SlotScheduler();
    SlotScheduler(const SlotScheduler&) = delete;
    SlotScheduler& operator=(const SlotScheduler&) = delete;

    // Queues a request. The prompt must be 1..n_ctx_per_slot tokens
    // (kiln::Error otherwise: callers check first and answer 400).
    std::shared_ptr<RequestChannel> submit(std::vector<int32_t> prompt, const GenerationParams& params);

    // Finishes every queued and running request with FinishReason::Error
    // ("the server is shutting down") and joins the engine thread. Idempotent.
    void stop();

    std::vector<SlotStatus> slots() const;
    size_t queued() const;
    int64_t n_ctx_per_slot() const noexcept { return config_.n_ctx_per_slot; }
    int64_t n_slots() const noexcept { return config_.n_slots; }

private:
    struct Job {
        std::vector<int32_t> prompt;
        GenerationParams params;
        std::shared_ptr<RequestChannel> channel;
    };
    struct Slot {
        std::vector<int32_t> cached;  // the tokens whose keys and values the cache holds
        // The running request (channel empty when idle).
        std::shared_ptr<RequestChannel> channel;
        GenerationParams params;
        std::optional<Sampler> sampler;
        std::optional<ReplyStream> reply;
        std::vector<int32_t> input;   // tokens still to evaluate: the prompt's rest, or the last sampled token
        size_t input_done = 0;
        std::vector<int32_t> history; // prompt and reply, for the repetition penalty
        int64_t prompt_tokens = 0, cached_tokens = 0, generated = 0;
        std::vector<TokenLogprob> unsent;
    };

    void run();
    void admit(Job job);
    int64_t pick_slot(const std::vector<int32_t>& prompt) const;
    bool step();
    void sample(int64_t slot, std::span<const float> logits);
    void finish(int64_t slot, FinishReason reason, std::string text, const std::string& error = {});
    void fail_everything(const std::string& message);
    void publish_status();

    const CausalLm& lm_;
    const Tokenizer& tokenizer_;
    SchedulerConfig config_;
    ThreadPool pool_;
    std::unique_ptr<CausalSession> session_;
    std::vector<Slot> slots_;  // engine thread only
    size_t next_prompt_slot_ = 0;  // where prompt chunks start, rotated so no prompt starves
    bool last_step_prompts_alone_ = false;  // the last step held short prompts only (see step())

    mutable std::mutex mutex_;  // guards queue_, status_, stopping_
    std::condition_variable wake_;
    std::deque<Job> queue_;
    std::vector<SlotStatus> status_;
    bool stopping_ = false;
    std::thread engine_;
    std::vector<int32_t> batch_tokens_, batch_slots_;
    std::vector<int32_t> end_tokens_;  // the vocabulary's end-of-generation ids (for ignore_eos)
    std::vector<float> masked_logits_;
};

}  // namespace kiln::server
