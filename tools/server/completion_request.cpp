#include "tools/server/completion_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "formats/checkpoint/json_limits.h"
#include "tools/server/api_error.h"

namespace kiln::server {

namespace {

using Json = nlohmann::ordered_json;

const Json* field(const Json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

double number_field(const Json& body, const char* name, double fallback, double min, double max) {
    const Json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) bad_request("'{}' must be a number", name);
    const double x = v->get<double>();
    if (!(x >= min && x <= max)) bad_request("'{}' must be between {} and {}, got {}", name, min, max, x);
    return x;
}

int64_t integer_field(const Json& body, const char* name, int64_t fallback, int64_t min, int64_t max) {
    const Json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer()) {
        // 16.0 is an integer to JavaScript clients. A double outside int64's
        // range must be refused before the cast, which would be undefined.
        const double d = v->is_number_float() ? v->get<double>() : 0.5;
        if (d != std::trunc(d)) bad_request("'{}' must be an integer", name);
        if (!(d >= -0x1p63 && d < 0x1p63)) bad_request("'{}' must be between {} and {}", name, min, max);
        return integer_field(Json{{name, static_cast<int64_t>(d)}}, name, fallback, min, max);
    }
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad_request("'{}' must be between {} and {}", name, min, max);
    const int64_t x = v->get<int64_t>();
    if (x < min || x > max) bad_request("'{}' must be between {} and {}, got {}", name, min, max, x);
    return x;
}

bool bool_field(const Json& body, const char* name, bool fallback) {
    const Json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) bad_request("'{}' must be true or false", name);
    return v->get<bool>();
}

std::vector<std::string> stop_strings(const Json& body) {
    const Json* v = field(body, "stop");
    if (!v) return {};
    std::vector<std::string> stops;
    if (v->is_string()) {
        stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        if (v->size() > 16) bad_request("'stop' has {} strings, at most 16 are allowed", v->size());
        for (const Json& s : *v) {
            if (!s.is_string()) bad_request("'stop' must be a string or a list of strings");
            stops.push_back(s.get<std::string>());
        }
    } else {
        bad_request("'stop' must be a string or a list of strings");
    }
    for (const std::string& s : stops)
        if (s.empty()) bad_request("'stop' strings must not be empty");
    return stops;
}

// OpenAI's {"token id": bias} (bias in [-100, 100]) or llama-server's
// [[id, bias], ...]; a bias of false bans the token (llama-server).
std::vector<LogitBias> logit_biases(const Json& body, int64_t n_vocab) {
    const Json* v = field(body, "logit_bias");
    if (!v) return {};
    std::vector<LogitBias> biases;
    const auto add = [&](int64_t id, const Json& bias) {
        if (id < 0 || id >= n_vocab) bad_request("'logit_bias' token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
        if (bias.is_boolean() && !bias.get<bool>()) {
            biases.push_back({static_cast<int32_t>(id), -INFINITY});
            return;
        }
        if (!bias.is_number()) bad_request("'logit_bias' values must be numbers (or false to ban a token)");
        const double b = bias.get<double>();
        if (!(b >= -100 && b <= 100)) bad_request("'logit_bias' values must be between -100 and 100, got {}", b);
        biases.push_back({static_cast<int32_t>(id), static_cast<float>(b)});
    };
    if (v->is_object()) {
        for (const auto& [key, bias] : v->items()) {
            const bool digits = !key.empty() && key.size() <= 10 &&
                                std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!digits) bad_request("'logit_bias' keys must be token ids, got '{}'", key);
            add(std::stoll(key), bias);
        }
    } else if (v->is_array()) {
        for (const Json& pair : *v) {
            if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
                bad_request("'logit_bias' as a list holds [token id, bias] pairs");
            add(pair[0].get<int64_t>(), pair[1]);
        }
    } else {
        bad_request("'logit_bias' must be an object of token ids to biases");
    }
    if (biases.size() > 1024) bad_request("'logit_bias' has {} entries, at most 1024 are allowed", biases.size());
    return biases;
}

// Fields of the OpenAI or llama-server APIs that kiln-server does not
// implement: accepted only with the value that changes nothing, so that a
// request never silently gets a different result than it asked for.
void refuse_unsupported(const Json& body) {
    const auto only = [&](const char* name, const char* neutral, auto&& is_neutral) {
        const Json* v = field(body, name);
        if (v && !is_neutral(*v)) bad_request("'{}' is not supported by kiln-server (only {})", name, neutral);
    };
    const auto number_is = [](double x) { return [x](const Json& v) { return v.is_number() && v.get<double>() == x; }; };
    const auto empty_list = [](const Json& v) { return v.is_array() && v.empty(); };
    const auto empty_string = [](const Json& v) { return v.is_string() && v.get<std::string>().empty(); };
    only("echo", "false", [](const Json& v) { return v.is_boolean() && !v.get<bool>(); });
    only("best_of", "1", number_is(1));
    only("suffix", "an empty string", empty_string);
    only("response_format", "{\"type\": \"text\"}", [](const Json& v) {
        return v.is_object() && v.contains("type") && v["type"] == "text";
    });
    only("tools", "an empty list", empty_list);
    only("functions", "an empty list", empty_list);
    only("tool_choice", "\"none\"", [](const Json& v) { return v == "none"; });
    only("function_call", "\"none\"", [](const Json& v) { return v == "none"; });
    only("grammar", "an empty string", empty_string);
    only("json_schema", "{}", [](const Json& v) { return v.is_object() && v.empty(); });
    only("mirostat", "0", number_is(0));
    only("typical_p", "1", number_is(1));
    only("tfs_z", "1", number_is(1));
    only("n_probs", "0", number_is(0));
    only("dry_multiplier", "0", number_is(0));
    only("xtc_probability", "0", number_is(0));
}

std::string message_content(const Json& message, size_t index, const std::string& role) {
    const auto it = message.find("content");
    if (it == message.end() || it->is_null()) {
        if (role == "assistant") return {};  // an assistant turn that only called tools
        bad_request("messages[{}] has no 'content'", index);
    }
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_array()) bad_request("messages[{}].content must be a string or a list of parts", index);
    std::string text;
    for (const Json& part : *it) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            bad_request("messages[{}].content parts must be objects with a 'type'", index);
        if (part["type"] != "text")
            bad_request("messages[{}].content part of type '{}' is not supported (only 'text')", index,
                        part["type"].get<std::string>());
        if (!part.contains("text") || !part["text"].is_string())
            bad_request("messages[{}].content text parts need a string 'text'", index);
        text += part["text"].get<std::string>();
    }
    return text;
}

}  // namespace

Json parse_json_body(std::string_view body) {
    // Copying and printing a value recurse once per level: a body of a
    // million '[' would parse, then overflow a handler thread's stack.
    if (json_nesting_depth(body, kMaxRequestJsonDepth) > kMaxRequestJsonDepth)
        bad_request("the request body nests arrays or objects more than {} levels deep", kMaxRequestJsonDepth);
    Json parsed;
    try {
        parsed = Json::parse(body.begin(), body.end());
    } catch (const nlohmann::json::exception& e) {
        // parse_error, and out_of_range for a number too large for a double (1e400).
        bad_request("the request body is not valid JSON: {}", e.what());
    }
    if (!parsed.is_object()) bad_request("the request body must be a JSON object");
    return parsed;
}

Json parse_messages(const Json& value) {
    if (!value.is_array()) bad_request("'messages' must be a list of messages");
    if (value.empty()) bad_request("'messages' must not be empty");
    Json messages = Json::array();
    for (size_t i = 0; i < value.size(); ++i) {
        const Json& m = value[i];
        if (!m.is_object()) bad_request("messages[{}] must be an object", i);
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string()) bad_request("messages[{}] needs a string 'role'", i);
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer")
            bad_request("messages[{}] has an unknown role '{}' (system, user, assistant, tool or developer)", i, r);
        Json out = m;  // keeps any other fields a template may read (name, tool_calls)
        out["content"] = message_content(m, i, r);
        messages.push_back(std::move(out));
    }
    return messages;
}

CompletionRequest parse_completion_request(const Json& body, Endpoint endpoint, const RequestLimits& limits) {
    CompletionRequest r;
    r.endpoint = endpoint;
    if (const Json* m = field(body, "model")) {
        if (!m->is_string()) bad_request("'model' must be a string");
        r.model = m->get<std::string>();
    }
    if (endpoint == Endpoint::Chat) {
        const Json* m = field(body, "messages");
        if (!m) bad_request("'messages' is required");
        r.messages = parse_messages(*m);
    } else {
        const Json* p = field(body, "prompt");
        if (!p) bad_request("'prompt' is required");
        if (p->is_string()) {
            r.prompt_text = p->get<std::string>();
        } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
            r.prompt_text = (*p)[0].get<std::string>();
        } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
            r.prompt_is_tokens = true;
            for (const Json& t : *p) {
                if (!t.is_number_integer()) bad_request("'prompt' token ids must be integers");
                const int64_t id = t.get<int64_t>();
                if (id < 0 || id >= limits.n_vocab)
                    bad_request("'prompt' token {} is outside the vocabulary (0..{})", id, limits.n_vocab - 1);
                r.prompt_tokens.push_back(static_cast<int32_t>(id));
            }
        } else {
            bad_request("'prompt' must be a string, a list of one string, or a list of token ids");
        }
    }
    refuse_unsupported(body);
    r.stream = bool_field(body, "stream", false);
    if (integer_field(body, "n", 1, 1, 1) != 1) bad_request("'n' must be 1");

    GenerationParams& g = r.params;
    // max_tokens (OpenAI), max_completion_tokens (its newer name), n_predict (llama-server).
    int64_t max_tokens = limits.default_max_tokens;
    for (const char* name : {"n_predict", "max_tokens", "max_completion_tokens"})
        max_tokens = integer_field(body, name, max_tokens, name[0] == 'n' ? -1 : 0, std::numeric_limits<int32_t>::max());
    if (max_tokens > limits.n_ctx_per_slot)
        bad_request("'max_tokens' is {}, more than the context of {} tokens a slot has", max_tokens, limits.n_ctx_per_slot);
    g.max_tokens = max_tokens;
    const SamplerParams& d = limits.sampling;  // the server's flags, else llama-server's defaults
    g.sampling.temperature = static_cast<float>(number_field(body, "temperature", d.temperature, 0, 100));
    g.sampling.top_p = static_cast<float>(number_field(body, "top_p", d.top_p, 0, 1));
    g.sampling.min_p = static_cast<float>(number_field(body, "min_p", d.min_p, 0, 1));
    g.sampling.top_k = static_cast<int32_t>(integer_field(body, "top_k", d.top_k, 0, std::numeric_limits<int32_t>::max()));
    g.sampling.repeat_penalty = static_cast<float>(number_field(body, "repeat_penalty", d.repeat_penalty, 0.01, 100));
    g.sampling.repeat_last_n = static_cast<int32_t>(
        integer_field(body, "repeat_last_n", d.repeat_last_n, -1, std::numeric_limits<int32_t>::max()));
    if (limits.seed_given) {
        g.sampling.seed = d.seed;
        r.seed_given = true;
    }
    if (const Json* s = field(body, "seed")) {
        if (!s->is_number_integer()) bad_request("'seed' must be an integer");
        // -1 asks for a random seed, as in llama-server.
        if (!(s->is_number_integer() && !s->is_number_unsigned() && s->get<int64_t>() == -1)) {
            g.sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
            r.seed_given = true;
        } else {
            r.seed_given = false;  // -1 asks for a random one even when the server has --seed
        }
    }
    g.sampling.presence_penalty = static_cast<float>(number_field(body, "presence_penalty", d.presence_penalty, -2, 2));
    g.sampling.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty", d.frequency_penalty, -2, 2));
    g.sampling.logit_bias = field(body, "logit_bias") ? logit_biases(body, limits.n_vocab) : d.logit_bias;
    g.stop = stop_strings(body);
    g.ignore_eos = bool_field(body, "ignore_eos", false);

    if (endpoint == Endpoint::Chat) {
        const bool logprobs = bool_field(body, "logprobs", false);
        const int64_t top = integer_field(body, "top_logprobs", 0, 0, 20);
        if (field(body, "top_logprobs") && !logprobs) bad_request("'top_logprobs' needs 'logprobs': true");
        g.top_logprobs = logprobs ? static_cast<int>(top) : -1;
    } else {
        // The legacy API: logprobs is the number of alternatives (0 = the chosen token's only).
        g.top_logprobs = static_cast<int>(integer_field(body, "logprobs", -1, 0, 20));
    }
    return r;
}

}  // namespace kiln::server
