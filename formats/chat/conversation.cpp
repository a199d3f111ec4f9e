#include "formats/chat/conversation.h"

#include "engine/core/error.h"
#include "formats/chat/chat_prompt.h"

namespace kiln {

Conversation::Conversation(const Tokenizer& tokenizer, const ModelChatTemplate& model, const std::string& system_prompt)
    : tokenizer_(tokenizer), template_(model.source) {
    options_.bos_token = model.bos_token;
    options_.eos_token = model.eos_token;
    options_.add_generation_prompt = true;
    if (!system_prompt.empty()) add("system", system_prompt);
}

void Conversation::add(const std::string& role, const std::string& content) {
    messages_.push_back({{"role", role}, {"content", content}});
}

std::vector<int32_t> Conversation::render_tokens() const {
    return chat_prompt_tokens(tokenizer_, template_.apply(messages_, options_));
}

size_t Conversation::first_turn() const {
    return !messages_.empty() && messages_[0].value("role", "") == "system" ? 1 : 0;
}

std::vector<int32_t> Conversation::prompt(int64_t max_tokens, int64_t* dropped) {
    int64_t removed = 0;
    std::vector<int32_t> tokens = render_tokens();
    while (static_cast<int64_t>(tokens.size()) > max_tokens) {
        const size_t first = first_turn();
        if (messages_.size() <= first + 1) {
            const size_t length = tokens.size();
            messages_.erase(messages_.end() - 1);
            fail("chat", "the message is {} tokens with the chat template{}, more than the context holds ({}): raise -c",
                 length, first == 1 ? " and the system prompt" : "", max_tokens);
        }
        // Drop the oldest turn: its first message and whatever follows up to the next user message,
        // so the conversation still starts with a user turn, as templates expect.
        messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first));
        ++removed;
        while (messages_.size() > first + 1 && messages_[first].value("role", "") != "user") {
            messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first));
            ++removed;
        }
        tokens = render_tokens();
    }
    if (dropped != nullptr) *dropped = removed;
    return tokens;
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) noexcept {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace kiln
