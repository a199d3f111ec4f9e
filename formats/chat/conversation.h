#pragma once
// A chat kept as its messages and rendered with the model's template for
// every turn. A turn's prompt is the whole conversation rendered again with
// the assistant's turn opened; the engine then evaluates only the tokens past
// the prefix its KV cache already holds (see common_prefix), so a turn costs
// its new tokens, and a template that rewrites earlier turns is still
// followed exactly. When the conversation outgrows the context, the oldest
// turns are dropped (the system prompt stays).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/chat/chat_template.h"

namespace kiln {

class Tokenizer;

class Conversation {
public:
    // `model` holds the template source and BOS/EOS texts (model_chat_template,
    // or a --chat-template-file's text in its source). A non-empty
    // system_prompt becomes the first message.
    Conversation(const Tokenizer& tokenizer, const ModelChatTemplate& model, const std::string& system_prompt);

    void add(const std::string& role, const std::string& content);

    // The tokens of the conversation followed by the opened assistant turn,
    // at most max_tokens of them: the oldest turns after the system prompt are
    // dropped until they fit, and *dropped counts the messages dropped. When
    // the last message alone (with the system prompt) does not fit, it is
    // removed and kiln::Error("chat", ...) says how long it was.
    std::vector<int32_t> prompt(int64_t max_tokens, int64_t* dropped = nullptr);

    const nlohmann::ordered_json& messages() const noexcept { return messages_; }

private:
    std::vector<int32_t> render_tokens() const;
    size_t first_turn() const;  // index of the first message after the system prompt

    const Tokenizer& tokenizer_;
    ChatTemplate template_;
    ChatTemplateOptions options_;
    nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

// How many leading tokens two sequences share.
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) noexcept;

}  // namespace kiln
