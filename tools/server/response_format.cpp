#include "tools/server/response_format.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "formats/tokenizer/tokenizer.h"

namespace kiln::server {

namespace {

using Json = nlohmann::ordered_json;

std::string random_id(std::string_view prefix) {
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{}{:012x}{:04x}", prefix, rng() & 0xffffffffffffULL, counter++ & 0xffff);
}

Json bytes_of(const std::string& s) {
    Json bytes = Json::array();
    for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
    return bytes;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
Json chat_logprobs(const ResponseContext& ctx, const std::vector<TokenLogprob>& tokens) {
    Json content = Json::array();
    for (const TokenLogprob& t : tokens) {
        const std::string piece = ctx.tokenizer->piece(t.id);
        Json top = Json::array();
        for (const auto& [id, lp] : t.top) {
            const std::string p = ctx.tokenizer->piece(id);
            top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
        }
        content.push_back({{"id", t.id}, {"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
Json text_logprobs(const ResponseContext& ctx, const std::vector<TokenLogprob>& tokens, int64_t offset) {
    Json pieces = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
    for (const TokenLogprob& t : tokens) {
        const std::string piece = ctx.tokenizer->piece(t.id);
        pieces.push_back(piece);
        lps.push_back(t.logprob);
        Json top = Json::object();
        for (const auto& [id, lp] : t.top) top[ctx.tokenizer->piece(id)] = lp;
        tops.push_back(top);
        offsets.push_back(offset);
        offset += static_cast<int64_t>(piece.size());
    }
    return {{"tokens", pieces}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json envelope(const ResponseContext& ctx, bool chunk) {
    const char* object = ctx.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                        : "text_completion";
    return {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model}, {"system_fingerprint", "kiln"}};
}

Json finish_value(const GenerationEvent& e) {
    if (!e.done) return nullptr;
    return e.finish == FinishReason::Length ? "length" : "stop";
}

}  // namespace

ResponseContext make_response_context(Endpoint endpoint, const std::string& model, bool logprobs,
                                      const Tokenizer& tokenizer) {
    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-");
    ctx.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ctx.model = model;
    ctx.logprobs = logprobs;
    ctx.tokenizer = &tokenizer;
    return ctx;
}

std::string dump_json(const Json& value) { return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string sse_event(const Json& value) { return "data: " + dump_json(value) + "\n\n"; }

Json usage_json(const GenerationEvent& last) {
    return {{"prompt_tokens", last.prompt_tokens},
            {"completion_tokens", last.completion_tokens},
            {"total_tokens", last.prompt_tokens + last.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", last.cached_tokens}}}};
}

Json native_chunk(const std::string& content) { return {{"index", 0}, {"content", content}, {"stop", false}}; }

Json native_final(const ResponseContext& ctx, const std::string& content, const GenerationEvent& last) {
    // llama-server's stop_type: "eos" (an end-of-generation token), "word" (a
    // stop string, named in stopping_word), "limit" (n_predict or the context).
    const char* stop_type = last.finish == FinishReason::Length ? "limit" : last.stop_word.empty() ? "eos" : "word";
    return {{"index", 0},
            {"content", content},
            {"stop", true},
            {"model", ctx.model},
            {"tokens_predicted", last.completion_tokens},
            {"tokens_evaluated", last.prompt_tokens},
            {"tokens_cached", last.cached_tokens},
            {"truncated", false},
            {"stop_type", stop_type},
            {"stopping_word", last.stop_word}};
}

Json first_chunk(const ResponseContext& ctx) {
    Json j = envelope(ctx, true);
    if (ctx.endpoint == Endpoint::Chat)
        j["choices"] = Json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    else
        j["choices"] = Json::array({{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    return j;
}

Json text_chunk(const ResponseContext& ctx, const GenerationEvent& event, int64_t text_offset) {
    Json j = envelope(ctx, true);
    Json choice = {{"index", 0}};
    if (ctx.endpoint == Endpoint::Chat) {
        choice["delta"] = event.text.empty() ? Json::object() : Json{{"content", event.text}};
        choice["logprobs"] = ctx.logprobs ? chat_logprobs(ctx, event.tokens) : Json(nullptr);
    } else {
        choice["text"] = event.text;
        choice["logprobs"] = ctx.logprobs ? text_logprobs(ctx, event.tokens, text_offset) : Json(nullptr);
    }
    choice["finish_reason"] = nullptr;  // the final chunk carries it
    j["choices"] = Json::array({choice});
    return j;
}

Json final_chunk(const ResponseContext& ctx, const GenerationEvent& event) {
    Json j = envelope(ctx, true);
    Json choice = {{"index", 0}};
    if (ctx.endpoint == Endpoint::Chat)
        choice["delta"] = Json::object();
    else
        choice["text"] = "";
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_value(event);
    j["choices"] = Json::array({choice});
    j["usage"] = usage_json(event);
    return j;
}

Json full_response(const ResponseContext& ctx, const std::string& text, const std::vector<TokenLogprob>& tokens,
                   const GenerationEvent& last) {
    Json j = envelope(ctx, false);
    Json choice = {{"index", 0}};
    if (ctx.endpoint == Endpoint::Chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text}};
        choice["logprobs"] = ctx.logprobs ? chat_logprobs(ctx, tokens) : Json(nullptr);
    } else {
        choice["text"] = text;
        choice["logprobs"] = ctx.logprobs ? text_logprobs(ctx, tokens, 0) : Json(nullptr);
    }
    choice["finish_reason"] = finish_value(last);
    j["choices"] = Json::array({choice});
    j["usage"] = usage_json(last);
    return j;
}

}  // namespace kiln::server
