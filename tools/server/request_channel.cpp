#include "tools/server/request_channel.h"

namespace kiln::server {

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
        case FinishReason::Error: return "error";
    }
    return "error";
}

void RequestChannel::push(GenerationEvent event) {
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        wake = !final_only_ || event.done;
        events_.push_back(std::move(event));
    }
    if (wake) ready_.notify_all();
}

bool RequestChannel::cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
}

void RequestChannel::cancel() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
}

GenerationEvent RequestChannel::take_merged() {
    GenerationEvent merged = std::move(events_.front());
    events_.pop_front();
    while (!events_.empty() && !merged.done) {
        GenerationEvent& e = events_.front();
        merged.text += e.text;
        for (auto& t : e.tokens) merged.tokens.push_back(std::move(t));
        merged.done = e.done;
        merged.finish = e.finish;
        merged.error = std::move(e.error);
        merged.prompt_tokens = e.prompt_tokens;
        merged.cached_tokens = e.cached_tokens;
        merged.completion_tokens = e.completion_tokens;
        merged.stop_word = std::move(e.stop_word);
        events_.pop_front();
    }
    return merged;
}

std::optional<GenerationEvent> RequestChannel::next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    return take_merged();
}

std::optional<GenerationEvent> RequestChannel::next_final(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    final_only_ = true;
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty() && events_.back().done; })) return std::nullopt;
    return take_merged();
}

}  // namespace kiln::server
