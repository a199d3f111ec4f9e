#include "tools/server/slot_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.h"
#include "formats/chat/conversation.h"

namespace kiln::server {

namespace {

// The chosen token's log-softmax and the `top` most likely tokens', from the raw logits.
TokenLogprob logprob_of(std::span<const float> logits, int32_t id, int top) {
    float max = -INFINITY;
    for (float v : logits) max = std::max(max, v);
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v - max));
    const float log_norm = max + static_cast<float>(std::log(sum));
    TokenLogprob result;
    result.id = id;
    result.logprob = logits[static_cast<size_t>(id)] - log_norm;
    if (top > 0) {
        std::vector<int32_t> ids(logits.size());
        std::iota(ids.begin(), ids.end(), 0);
        const auto n = std::min<size_t>(static_cast<size_t>(top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
            const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
            return la > lb || (la == lb && a < b);
        });
        for (size_t i = 0; i < n; ++i) result.top.emplace_back(ids[i], logits[static_cast<size_t>(ids[i])] - log_norm);
    }
    return result;
}

}  // namespace

int64_t prompt_tokens_for_step(int64_t replies, int64_t available, int64_t n_slots) {
    if (available <= 0) return 0;
    const int64_t small = n_slots + 8;  // every batch size up to here is allowed
    const int64_t most = replies + available;
    if (most <= small) return available;
    int64_t size = 1;
    while (size * 2 <= most) size *= 2;
    return std::max(size, small) - replies;
}

bool prompts_run_alone(int64_t waiting, int64_t n_slots, bool last_step_alone) {
    return waiting > 0 && waiting <= n_slots + 8 && !last_step_alone;
}

SlotScheduler::SlotScheduler(const CausalLm& lm, const Tokenizer& tokenizer, const SchedulerConfig& config)
    : lm_(lm), tokenizer_(tokenizer), config_(config), pool_(config.threads, LoadAdaptation::follow_free_cpus) {
    if (config_.n_slots < 1 || config_.n_ctx_per_slot < 1 || config_.n_batch < 1)
        fail("server", "slots, context and batch must be positive (got {}, {}, {})", config_.n_slots,
             config_.n_ctx_per_slot, config_.n_batch);
    session_ = lm_.new_session(config_.n_ctx_per_slot, config_.n_slots, Executor::Mode::Fast, config_.cache_type);
    slots_.resize(static_cast<size_t>(config_.n_slots));
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer_.vocab_size()); ++id)
        if (tokenizer_.is_eog(id)) end_tokens_.push_back(id);
    status_.resize(slots_.size());
    for (size_t i = 0; i < status_.size(); ++i) {
        status_[i].id = static_cast<int64_t>(i);
        status_[i].n_ctx = config_.n_ctx_per_slot;
    }
    engine_ = std::thread([this] { run(); });
}

SlotScheduler::~SlotScheduler() { stop(); }

std::shared_ptr<RequestChannel> SlotScheduler::submit(std::vector<int32_t> prompt, const GenerationParams& params) {
    if (prompt.empty()) fail("server", "the prompt has no tokens");
    if (static_cast<int64_t>(prompt.size()) > config_.n_ctx_per_slot)
        fail("server", "the prompt is {} tokens, more than a slot's context of {}", prompt.size(), config_.n_ctx_per_slot);
    const auto vocab = static_cast<int32_t>(lm_.info().n_vocab);
    for (int32_t t : prompt)
        if (t < 0 || t >= vocab) fail("server", "token {} is outside the vocabulary of {}", t, vocab);
    auto channel = std::make_shared<RequestChannel>();
    {
        std::lock_guard lock(mutex_);
        if (stopping_) {
            GenerationEvent e;
            e.done = true;
            e.finish = FinishReason::Error;
            e.error = "the server is shutting down";
            channel->push(std::move(e));
            return channel;
        }
        queue_.push_back(Job{std::move(prompt), params, channel});
    }
    wake_.notify_all();
    return channel;
}

void SlotScheduler::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (engine_.joinable()) engine_.join();
}

std::vector<SlotStatus> SlotScheduler::slots() const {
    std::lock_guard lock(mutex_);
    return status_;
}

size_t SlotScheduler::queued() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

void SlotScheduler::run() {
    for (;;) {
        std::vector<Job> admitted;
        {
            std::unique_lock lock(mutex_);
            const auto busy = [&] {
                return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.channel != nullptr; });
            };
            const auto idle_slots = [&] {
                return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.channel == nullptr; });
            };
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy(); });
            if (stopping_) break;
            for (auto idle = idle_slots(); idle > 0 && !queue_.empty(); --idle) {
                admitted.push_back(std::move(queue_.front()));
                queue_.pop_front();
            }
        }
        try {
            for (Job& job : admitted) admit(std::move(job));
            for (size_t s = 0; s < slots_.size(); ++s)
                if (slots_[s].channel && slots_[s].channel->cancelled())
                    finish(static_cast<int64_t>(s), FinishReason::Cancelled, {});
            step();
        } catch (const std::exception& e) {
            // Nothing a request sends should get here (requests are checked
            // first); if the engine fails anyway, the requests it ran get the
            // error and the server goes on with a clean cache.
            fail_everything(e.what());
            session_->reset();
            for (Slot& slot : slots_) slot.cached.clear();
        }
        publish_status();
    }
    fail_everything("the server is shutting down");
    publish_status();
}

int64_t SlotScheduler::pick_slot(const std::vector<int32_t>& prompt) const {
    int64_t best = -1;
    size_t best_shared = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s].channel) continue;
        const size_t shared = common_prefix(slots_[s].cached, prompt);
        if (best < 0 || shared > best_shared) {
            best = static_cast<int64_t>(s);
            best_shared = shared;
        }
    }
    return best;
}

void SlotScheduler::admit(Job job) {
    const int64_t index = pick_slot(job.prompt);
    if (index < 0) fail("server", "no idle slot to admit a request (scheduler bug)");
    Slot& slot = slots_[static_cast<size_t>(index)];
    // At least the prompt's last token is evaluated: its logits give the first reply token.
    const size_t keep = std::min(common_prefix(slot.cached, job.prompt), job.prompt.size() - 1);
    session_->truncate(index, static_cast<int64_t>(keep));
    slot.cached.resize(keep);
    slot.channel = std::move(job.channel);
    slot.params = std::move(job.params);
    slot.sampler.emplace(slot.params.sampling);
    slot.reply.emplace(slot.params.stop);
    slot.input.assign(job.prompt.begin() + static_cast<std::ptrdiff_t>(keep), job.prompt.end());
    slot.input_done = 0;
    slot.history = std::move(job.prompt);
    slot.prompt_tokens = static_cast<int64_t>(slot.history.size());
    slot.cached_tokens = static_cast<int64_t>(keep);
    slot.generated = 0;
    slot.unsent.clear();
    if (slot.params.max_tokens == 0) finish(index, FinishReason::Length, {});
}

bool SlotScheduler::step() {
    batch_tokens_.clear();
    batch_slots_.clear();
    struct Part {
        int64_t slot;
        size_t count;
    };
    std::vector<Part> parts;
    int64_t waiting = 0;  // prompt tokens still to evaluate, over all slots
    for (const Slot& slot : slots_)
        if (slot.channel && slot.generated == 0) waiting += static_cast<int64_t>(slot.input.size() - slot.input_done);
    // Short prompts go first, alone: a request whose whole prompt fits a small
    // step gets its first token after that step, not after one that also
    // carries every streaming reply (on a 2-core machine a step of 4 tokens
    // costs 1.6x one of 1, which put a new chat turn's first token at 2.4x its
    // idle time). Such a step never follows another, so arrivals cannot stall
    // the replies: each still advances at least every second step. Long
    // prompts are chunked in beside the replies as before.
    const bool prompts_alone = prompts_run_alone(waiting, config_.n_slots, last_step_prompts_alone_);
    last_step_prompts_alone_ = prompts_alone;
    // Replies first: each running reply advances by one token every step.
    for (size_t s = 0; s < slots_.size() && !prompts_alone; ++s) {
        Slot& slot = slots_[s];
        if (!slot.channel || slot.generated == 0 || slot.input_done >= slot.input.size()) continue;
        batch_tokens_.push_back(slot.input[slot.input_done]);
        batch_slots_.push_back(static_cast<int32_t>(s));
        parts.push_back({static_cast<int64_t>(s), 1});
    }
    // Then prompts, in chunks, within the step's prompt budget.
    int64_t budget = prompt_tokens_for_step(static_cast<int64_t>(batch_tokens_.size()),
                                            std::min(waiting, config_.n_batch), config_.n_slots);
    for (size_t k = 0; k < slots_.size() && budget > 0; ++k) {
        const size_t s = (next_prompt_slot_ + k) % slots_.size();
        Slot& slot = slots_[s];
        if (!slot.channel || slot.generated != 0 || slot.input_done >= slot.input.size()) continue;
        const size_t count = std::min<size_t>(slot.input.size() - slot.input_done, static_cast<size_t>(budget));
        for (size_t i = 0; i < count; ++i) {
            batch_tokens_.push_back(slot.input[slot.input_done + i]);
            batch_slots_.push_back(static_cast<int32_t>(s));
        }
        parts.push_back({static_cast<int64_t>(s), count});
        budget -= static_cast<int64_t>(count);
    }
    next_prompt_slot_ = (next_prompt_slot_ + 1) % slots_.size();
    if (batch_tokens_.empty()) return false;

    const std::span<const float> logits = session_->eval_slots(batch_tokens_, batch_slots_, pool_);
    const auto n_vocab = static_cast<size_t>(lm_.info().n_vocab);
    // Where each slot's tokens sit in the batch: replies first, then prompt chunks, in the order added.
    size_t row = 0;
    for (const Part& part : parts) {
        Slot& slot = slots_[static_cast<size_t>(part.slot)];
        for (size_t i = 0; i < part.count; ++i) slot.cached.push_back(slot.input[slot.input_done + i]);
        slot.input_done += part.count;
        row += part.count;
        if (slot.input_done == slot.input.size()) sample(part.slot, logits.subspan((row - 1) * n_vocab, n_vocab));
    }
    return true;
}

void SlotScheduler::sample(int64_t index, std::span<const float> logits) {
    Slot& slot = slots_[static_cast<size_t>(index)];
    if (slot.params.ignore_eos && !end_tokens_.empty()) {
        masked_logits_.assign(logits.begin(), logits.end());
        for (int32_t id : end_tokens_)
            if (static_cast<size_t>(id) < masked_logits_.size()) masked_logits_[static_cast<size_t>(id)] = -INFINITY;
        logits = masked_logits_;
    }
    const int32_t token = slot.sampler->sample(logits, slot.history);
    if (tokenizer_.is_eog(token)) {
        finish(index, FinishReason::Stop, slot.reply->flush());
        return;
    }
    if (slot.params.top_logprobs >= 0) slot.unsent.push_back(logprob_of(logits, token, slot.params.top_logprobs));
    slot.history.push_back(token);
    ++slot.generated;
    std::string text = slot.reply->feed(tokenizer_.piece(token));
    if (slot.reply->stopped()) {
        finish(index, FinishReason::Stop, std::move(text));
        return;
    }
    const bool at_limit = slot.params.max_tokens >= 0 && slot.generated >= slot.params.max_tokens;
    // The new token must be evaluated before the next one is sampled: it needs a row of the slot's cache.
    const bool context_full = static_cast<int64_t>(slot.cached.size()) >= config_.n_ctx_per_slot;
    if (at_limit || context_full) {
        finish(index, FinishReason::Length, text + slot.reply->flush());
        return;
    }
    GenerationEvent event;
    event.text = std::move(text);
    event.tokens = std::move(slot.unsent);
    slot.unsent.clear();
    if (!event.text.empty() || !event.tokens.empty()) slot.channel->push(std::move(event));
    slot.input.assign(1, token);
    slot.input_done = 0;
}

void SlotScheduler::finish(int64_t index, FinishReason reason, std::string text, const std::string& error) {
    Slot& slot = slots_[static_cast<size_t>(index)];
    GenerationEvent event;
    event.text = std::move(text);
    event.tokens = std::move(slot.unsent);
    event.done = true;
    event.finish = reason;
    event.error = error;
    event.prompt_tokens = slot.prompt_tokens;
    event.cached_tokens = slot.cached_tokens;
    event.completion_tokens = slot.generated;
    if (slot.reply) event.stop_word = slot.reply->stop_found();
    slot.channel->push(std::move(event));
    slot.channel.reset();
    slot.sampler.reset();
    slot.reply.reset();
    slot.input.clear();
    slot.input_done = 0;
    slot.unsent.clear();
}

void SlotScheduler::fail_everything(const std::string& message) {
    for (size_t s = 0; s < slots_.size(); ++s)
        if (slots_[s].channel) finish(static_cast<int64_t>(s), FinishReason::Error, {}, message);
    std::deque<Job> waiting;
    {
        std::lock_guard lock(mutex_);
        waiting.swap(queue_);
    }
    for (Job& job : waiting) {
        GenerationEvent e;
        e.done = true;
        e.finish = FinishReason::Error;
        e.error = message;
        job.channel->push(std::move(e));
    }
}

void SlotScheduler::publish_status() {
    std::lock_guard lock(mutex_);
    for (size_t s = 0; s < slots_.size(); ++s) {
        SlotStatus& st = status_[s];
        st.busy = slots_[s].channel != nullptr;
        st.n_past = static_cast<int64_t>(slots_[s].cached.size());
        st.prompt_tokens = slots_[s].prompt_tokens;
        st.generated = slots_[s].generated;
    }
}

}  // namespace kiln::server
