#pragma once
// A completion request's JSON, checked and turned into what the scheduler
// needs. Everything a client can get wrong (malformed JSON, a field of the
// wrong type, a value out of range, an unknown role) is an ApiError(400) that
// names the field. Fields kiln does not use are ignored, as OpenAI clients
// send many.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/server/request_channel.h"

namespace kiln::server {

enum class Endpoint { Chat, Text };  // /v1/chat/completions, /v1/completions

struct RequestLimits {
    int64_t default_max_tokens = -1;  // the server's -n
    int64_t n_ctx_per_slot = 0;       // max_tokens above it can never be honoured
    int64_t n_vocab = 0;              // prompt token ids must be below it
    // The server's sampling flags (--temp, --top-k, ...): what a request that
    // leaves a field out gets (SamplerParams' defaults are llama-server's).
    // seed_given: --seed was given (else a random seed).
    SamplerParams sampling;
    bool seed_given = false;
};

struct CompletionRequest {
    Endpoint endpoint = Endpoint::Chat;
    nlohmann::ordered_json messages;   // Chat: [{"role", "content"}], content made a string
    std::string prompt_text;           // Text: the prompt as text ...
    std::vector<int32_t> prompt_tokens;  // ... or as token ids (prompt_is_tokens)
    bool prompt_is_tokens = false;
    GenerationParams params;
    bool stream = false;
    bool seed_given = false;
    std::string model;  // as the client named it (echoed back)
};

// Deeper nesting than any request needs (OpenAI tool schemas nest a few
// dozen levels at most).
inline constexpr size_t kMaxRequestJsonDepth = 256;

// Parses a JSON text; throws ApiError(400) for anything wrong with it, nesting
// deeper than kMaxRequestJsonDepth included.
nlohmann::ordered_json parse_json_body(std::string_view body);

CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, Endpoint endpoint,
                                           const RequestLimits& limits);

// The messages of a chat request (or of /apply-template): a non-empty array
// of {"role": system|user|assistant|tool|developer, "content": text or
// [{"type": "text", "text": ...}]}. Returns them with each content a string.
nlohmann::ordered_json parse_messages(const nlohmann::ordered_json& value);

}  // namespace kiln::server
