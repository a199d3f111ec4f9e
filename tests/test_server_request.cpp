// kiln-server's request parsing: what OpenAI clients send becomes the
// scheduler's parameters, and every mistake is a 400 naming the field.
#include <catch2/catch.hpp>

#include <cmath>

#include "tools/server/api_error.h"
#include "tools/server/completion_request.h"
#include "tools/server/response_format.h"
#include "tools/server/server_options.h"

using namespace kiln::server;
using Json = nlohmann::ordered_json;

namespace {

RequestLimits limits() {
    RequestLimits l;
    l.default_max_tokens = -1;
    l.n_ctx_per_slot = 256;
    l.n_vocab = 512;
    return l;
}

CompletionRequest chat(const std::string& body) {
    return parse_completion_request(parse_json_body(body), Endpoint::Chat, limits());
}

CompletionRequest text(const std::string& body) {
    return parse_completion_request(parse_json_body(body), Endpoint::Text, limits());
}

// The status and message of the ApiError that `f` throws (0 if none).
template <typename F>
std::pair<int, std::string> error_of(F f) {
    try {
        f();
    } catch (const ApiError& e) {
        return {e.status(), e.what()};
    }
    return {0, ""};
}

}  // namespace

TEST_CASE("a chat request's fields become generation parameters", "[server]") {
    const auto r = chat(R"({"model": "m", "messages": [{"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
        "stream": true, "max_tokens": 12, "temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1,
        "seed": 42, "stop": ["\n", "User:"], "logprobs": true, "top_logprobs": 3, "presence_penalty": 0})");
    CHECK(r.stream);
    CHECK(r.model == "m");
    REQUIRE(r.messages.size() == 2);
    CHECK(r.messages[1]["content"] == "hi there");
    CHECK(r.params.max_tokens == 12);
    CHECK(r.params.sampling.temperature == 0.0f);
    CHECK(r.params.sampling.top_p == 0.5f);
    CHECK(r.params.sampling.top_k == 7);
    CHECK(r.params.sampling.min_p == Approx(0.1f));
    CHECK(r.params.sampling.seed == 42);
    CHECK(r.seed_given);
    CHECK(r.params.stop == std::vector<std::string>{"\n", "User:"});
    CHECK(r.params.top_logprobs == 3);
}

TEST_CASE("a completion request takes a prompt as text or token ids, and llama-server's n_predict", "[server]") {
    const auto a = text(R"({"prompt": "Once upon", "n_predict": 5, "stop": "x", "logprobs": 2})");
    CHECK(a.prompt_text == "Once upon");
    CHECK_FALSE(a.prompt_is_tokens);
    CHECK(a.params.max_tokens == 5);
    CHECK(a.params.stop == std::vector<std::string>{"x"});
    CHECK(a.params.top_logprobs == 2);
    CHECK_FALSE(a.stream);
    CHECK_FALSE(a.seed_given);
    const auto b = text(R"({"prompt": [1, 2, 3], "max_tokens": null, "seed": -1})");
    CHECK(b.prompt_is_tokens);
    CHECK(b.prompt_tokens == std::vector<int32_t>{1, 2, 3});
    CHECK(b.params.max_tokens == -1);
    CHECK(b.params.top_logprobs == -1);
    CHECK_FALSE(b.seed_given);
    CHECK(text(R"({"prompt": ["one string"]})").prompt_text == "one string");
}

TEST_CASE("logit_bias, presence_penalty and frequency_penalty reach the sampler", "[server]") {
    const auto a = text(R"({"prompt": "x", "logit_bias": {"13": 5, "7": -100.0}, "presence_penalty": 0.5,
        "frequency_penalty": -1.25})");
    REQUIRE(a.params.sampling.logit_bias.size() == 2);
    CHECK(a.params.sampling.logit_bias[0].token == 13);
    CHECK(a.params.sampling.logit_bias[0].bias == 5.0f);
    CHECK(a.params.sampling.logit_bias[1].token == 7);
    CHECK(a.params.sampling.logit_bias[1].bias == -100.0f);
    CHECK(a.params.sampling.presence_penalty == 0.5f);
    CHECK(a.params.sampling.frequency_penalty == -1.25f);
    // llama-server's list form; false bans the token.
    const auto b = text(R"({"prompt": "x", "logit_bias": [[3, 1.5], [4, false]]})");
    REQUIRE(b.params.sampling.logit_bias.size() == 2);
    CHECK(b.params.sampling.logit_bias[0].bias == 1.5f);
    CHECK(b.params.sampling.logit_bias[1].token == 4);
    CHECK(std::isinf(b.params.sampling.logit_bias[1].bias));
    CHECK(b.params.sampling.logit_bias[1].bias < 0);
    const auto c = text(R"({"prompt": "x"})");
    CHECK(c.params.sampling.logit_bias.empty());
    CHECK(c.params.sampling.presence_penalty == 0.0f);
    CHECK(c.params.sampling.frequency_penalty == 0.0f);
}

TEST_CASE("fields kiln-server does not implement pass only with their neutral values", "[server]") {
    // What OpenAI clients send by default changes nothing and is accepted.
    CHECK_NOTHROW(text(R"({"prompt": "x", "echo": false, "best_of": 1, "suffix": "", "user": "u",
        "response_format": {"type": "text"}, "tools": [], "tool_choice": "none", "grammar": "", "json_schema": {},
        "mirostat": 0, "typical_p": 1, "tfs_z": 1.0, "n_probs": 0, "dry_multiplier": 0, "xtc_probability": 0,
        "logit_bias": {}, "presence_penalty": 0, "frequency_penalty": 0, "stream_options": {"include_usage": true}})"));
    const std::vector<std::pair<std::string, std::string>> cases{
        {R"("echo": true)", "'echo' is not supported by kiln-server (only false)"},
        {R"("best_of": 3)", "'best_of' is not supported"},
        {R"("suffix": "end")", "'suffix' is not supported"},
        {R"("response_format": {"type": "json_object"})", "'response_format' is not supported"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}])", "'tools' is not supported"},
        {R"("tool_choice": "auto")", "'tool_choice' is not supported"},
        {R"("grammar": "root ::= x")", "'grammar' is not supported"},
        {R"("json_schema": {"type": "object"})", "'json_schema' is not supported"},
        {R"("mirostat": 2)", "'mirostat' is not supported"},
        {R"("typical_p": 0.5)", "'typical_p' is not supported"},
        {R"("n_probs": 5)", "'n_probs' is not supported"},
        {R"("logit_bias": {"x": 1})", "keys must be token ids, got 'x'"},
        {R"("logit_bias": {" 13": 1})", "keys must be token ids"},
        {R"("logit_bias": {"512": 1})", "'logit_bias' token 512 is outside the vocabulary (0..511)"},
        {R"("logit_bias": {"3": 101})", "between -100 and 100"},
        {R"("logit_bias": {"3": "up"})", "must be numbers (or false"},
        {R"("logit_bias": [[3]])", "[token id, bias] pairs"},
        {R"("logit_bias": 5)", "must be an object"},
        {R"("presence_penalty": 2.5)", "'presence_penalty' must be between -2 and 2"},
        {R"("frequency_penalty": "a")", "'frequency_penalty' must be a number"},
    };
    for (const auto& [field, message] : cases) {
        INFO(field);
        const auto [status, what] = error_of([&] { text(R"({"prompt": "x", )" + field + "}"); });
        CHECK(status == 400);
        CHECK_THAT(what, Catch::Contains(message));
    }
}

TEST_CASE("the server's sampling flags are the defaults of requests that leave the fields out", "[server]") {
    std::vector<std::string> words{"kiln-server", "-m", "model.gguf", "--temp", "0.25", "--top-k", "5", "-s", "77",
                                   "--presence-penalty", "0.5", "-l", "9+2.5", "--repeat-last-n", "16"};
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    const ServerOptions o = parse_server_options(static_cast<int>(argv.size()), argv.data());
    CHECK(o.sampling.temperature == 0.25f);
    CHECK(o.sampling.top_k == 5);
    CHECK(o.sampling.top_p == 0.95f);  // llama-server's default where no flag is given
    CHECK(o.seed_given);
    RequestLimits l = limits();
    l.sampling = o.sampling;
    l.seed_given = o.seed_given;
    const auto plain = parse_completion_request(parse_json_body(R"({"prompt": "x"})"), Endpoint::Text, l);
    CHECK(plain.params.sampling.temperature == 0.25f);
    CHECK(plain.params.sampling.top_k == 5);
    CHECK(plain.params.sampling.repeat_last_n == 16);
    CHECK(plain.params.sampling.presence_penalty == 0.5f);
    CHECK(plain.seed_given);
    CHECK(plain.params.sampling.seed == 77);
    REQUIRE(plain.params.sampling.logit_bias.size() == 1);
    CHECK(plain.params.sampling.logit_bias[0].token == 9);
    CHECK(plain.params.sampling.logit_bias[0].bias == 2.5f);
    // The request's own fields win; "seed": -1 asks for a random seed.
    const auto own = parse_completion_request(
        parse_json_body(R"({"prompt": "x", "temperature": 1.5, "seed": -1, "logit_bias": {"3": -1}})"), Endpoint::Text, l);
    CHECK(own.params.sampling.temperature == 1.5f);
    CHECK_FALSE(own.seed_given);
    REQUIRE(own.params.sampling.logit_bias.size() == 1);
    CHECK(own.params.sampling.logit_bias[0].token == 3);
}

TEST_CASE("bad requests are 400 errors that name the problem", "[server]") {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"{not json", "not valid JSON"},
        {"[1, 2]", "must be a JSON object"},
        {R"({"messages": "hi"})", "'messages' must be a list"},
        {R"({"messages": []})", "must not be empty"},
        {R"({})", "'messages' is required"},
        {R"({"messages": [{"role": "wizard", "content": "x"}]})", "unknown role 'wizard'"},
        {R"({"messages": [{"content": "x"}]})", "needs a string 'role'"},
        {R"({"messages": [{"role": "user"}]})", "has no 'content'"},
        {R"({"messages": [{"role": "user", "content": 5}]})", "must be a string or a list of parts"},
        {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "'image_url' is not supported"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -3})", "'max_tokens' must be between 0"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"})", "'max_tokens' must be an integer"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 300})", "more than the context of 256"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": -0.5})", "'temperature' must be between 0"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "'temperature' must be a number"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 1.5})", "'top_p' must be between 0 and 1"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_k": -1})", "'top_k' must be between 0"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "'stream' must be true or false"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": 3})", "'stop' must be a string or a list"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": [""]})", "must not be empty"},
        {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "'n' must be between 1 and 1"},
        {R"({"messages": [{"role": "user", "content": "x"}], "seed": 1.5})", "'seed' must be an integer"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "needs 'logprobs': true"},
        {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})", "between 0 and 20"},
    };
    for (const auto& [body, message] : cases) {
        INFO(body);
        const auto [status, what] = error_of([&] { chat(body); });
        CHECK(status == 400);
        CHECK_THAT(what, Catch::Contains(message));
    }
    const auto [status, what] = error_of([] { text(R"({"prompt": [1, 512]})"); });
    CHECK(status == 400);
    CHECK_THAT(what, Catch::Contains("outside the vocabulary"));
    CHECK(error_of([] { text(R"({"prompt": {"a": 1}})"); }).first == 400);
    CHECK(error_of([] { text(R"({"prompt": "x", "logprobs": true})"); }).first == 400);
}

TEST_CASE("hostile request bodies are 400 errors, never another exception or a deep copy", "[server]") {
    // A number too large for a double is nlohmann's out_of_range, not a
    // parse_error: it escaped as a 500 until fuzz-server-request found it.
    for (const std::string body : {R"({"prompt": 1e400})", R"({"messages": [], "temperature": -1e999})",
                                   R"({"prompt": 1844674401e308})"}) {
        INFO(body);
        const auto [status, what] = error_of([&] { parse_json_body(body); });
        CHECK(status == 400);
        CHECK_THAT(what, Catch::Contains("not valid JSON") && Catch::Contains("number overflow"));
    }
    // A float where an integer goes: whole values are taken, others refused,
    // and one beyond int64's range is refused before any cast.
    CHECK(chat(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 16.0})").params.max_tokens == 16);
    for (const std::string field : {R"("max_tokens": 1e300)", R"("max_tokens": -9.3e18)", R"("top_k": 2.4e48)"}) {
        INFO(field);
        const auto [status, what] = error_of([&] { chat(R"({"messages": [{"role": "user", "content": "x"}], )" + field + "}"); });
        CHECK(status == 400);
        CHECK_THAT(what, Catch::Contains("must be between"));
    }
    CHECK(error_of([] { text(R"({"prompt": "x", "logprobs": 2444444444444444444444444444444444444444444444444})"); }).first == 400);
    CHECK(error_of([] { chat(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2.5})"); }).second ==
          "'max_tokens' must be an integer");

    // Nesting is refused before parsing (a message is copied, and error text
    // printed, one stack frame per level); brackets inside strings do not count.
    const std::string deep = std::string(kMaxRequestJsonDepth + 1, '[') + std::string(kMaxRequestJsonDepth + 1, ']');
    const auto [status, what] = error_of([&] { chat(R"({"messages": [{"role": "user", "content": "x", "name": )" + deep + "}]}"); });
    CHECK(status == 400);
    CHECK_THAT(what, Catch::Contains("more than 256 levels deep"));
    CHECK(error_of([] { parse_json_body(std::string(1'000'000, '{')); }).first == 400);
    const std::string at_limit = std::string(kMaxRequestJsonDepth - 3, '[') + std::string(kMaxRequestJsonDepth - 3, ']');
    CHECK(chat(R"({"messages": [{"role": "user", "content": "x", "name": )" + at_limit + "}]}").messages.size() == 1);
    CHECK(chat(R"({"messages": [{"role": "user", "content": ")" + std::string(10'000, '[') + "\"}]}").messages[0]["content"] ==
          std::string(10'000, '['));
}

TEST_CASE("errors and streamed chunks have OpenAI's shapes", "[server]") {
    const nlohmann::json e = error_json(401, "invalid API key");
    CHECK(e == nlohmann::json::parse(R"({"error": {"message": "invalid API key", "type": "authentication_error", "code": 401}})"));
    CHECK(error_type(400) == "invalid_request_error");
    CHECK(error_type(404) == "not_found_error");
    CHECK(error_type(503) == "unavailable_error");
    CHECK(error_type(500) == "server_error");

    ResponseContext ctx;
    ctx.endpoint = Endpoint::Chat;
    ctx.id = "chatcmpl-1";
    ctx.created = 7;
    ctx.model = "m";
    GenerationEvent piece;
    piece.text = "Hi";
    const Json chunk = text_chunk(ctx, piece, 0);
    CHECK(chunk["object"] == "chat.completion.chunk");
    CHECK(chunk["choices"][0]["delta"] == Json{{"content", "Hi"}});
    CHECK(chunk["choices"][0]["finish_reason"].is_null());
    GenerationEvent last;
    last.done = true;
    last.finish = FinishReason::Length;
    last.prompt_tokens = 5;
    last.completion_tokens = 3;
    const Json end = final_chunk(ctx, last);
    CHECK(end["choices"][0]["finish_reason"] == "length");
    CHECK(end["choices"][0]["delta"] == Json::object());
    CHECK(end["usage"]["total_tokens"] == 8);
    CHECK(sse_event(Json{{"a", 1}}) == "data: {\"a\":1}\n\n");
    // Bytes that are not UTF-8 never make a response fail.
    CHECK_THAT(dump_json(Json{{"t", std::string("a\xe2\x82")}}), Catch::StartsWith("{\"t\":\"a\xef\xbf\xbd"));
}
