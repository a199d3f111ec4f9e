#pragma once
// The JSON kiln-server answers completions with, in OpenAI's shapes:
// chat.completion / chat.completion.chunk for /v1/chat/completions and
// text_completion for /v1/completions, streamed as server-sent events
// ("data: {json}\n\n" ... "data: [DONE]\n\n") or sent whole.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/server/completion_request.h"
#include "tools/server/request_channel.h"

namespace kiln {
class Tokenizer;
}

namespace kiln::server {

// What every response of one request shares.
struct ResponseContext {
    Endpoint endpoint = Endpoint::Chat;
    std::string id;       // "chatcmpl-..." or "cmpl-..."
    int64_t created = 0;  // Unix seconds
    std::string model;
    bool logprobs = false;
    const Tokenizer* tokenizer = nullptr;  // for the text of tokens in logprobs
};

ResponseContext make_response_context(Endpoint endpoint, const std::string& model, bool logprobs,
                                      const Tokenizer& tokenizer);

// JSON text that never fails: bytes that are not UTF-8 (a token that is half
// a character, in logprobs) become U+FFFD.
std::string dump_json(const nlohmann::ordered_json& value);
// One server-sent event carrying `value`.
std::string sse_event(const nlohmann::ordered_json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// A streamed chunk: the first (the chat reply's role), one with new text,
// and the last (finish_reason and usage).
nlohmann::ordered_json first_chunk(const ResponseContext& ctx);
nlohmann::ordered_json text_chunk(const ResponseContext& ctx, const GenerationEvent& event, int64_t text_offset);
nlohmann::ordered_json final_chunk(const ResponseContext& ctx, const GenerationEvent& event);

// The whole response: `text` and `tokens` gathered from every event, `last` the final one.
nlohmann::ordered_json full_response(const ResponseContext& ctx, const std::string& text,
                                     const std::vector<TokenLogprob>& tokens, const GenerationEvent& last);

nlohmann::ordered_json usage_json(const GenerationEvent& last);

// llama-server's own POST /completion: a streamed piece of text, and the
// whole answer (also the last event of its stream, which has no [DONE]).
nlohmann::ordered_json native_chunk(const std::string& content);
nlohmann::ordered_json native_final(const ResponseContext& ctx, const std::string& content, const GenerationEvent& last);

}  // namespace kiln::server
