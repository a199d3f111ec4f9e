#include "tools/server/http_routes.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "engine/core/error.h"
#include "formats/chat/chat_prompt.h"
#include "formats/tokenizer/utf8.h"
#include "tools/common/version.h"
#include "tools/server/api_error.h"
#include "tools/server/chat_page.h"
#include "tools/server/completion_request.h"
#include "tools/server/response_format.h"

namespace kiln::server {

namespace {

using Json = nlohmann::ordered_json;
constexpr auto kPoll = std::chrono::milliseconds(100);

void send_json(httplib::Response& res, const Json& value, int status = 200) {
    res.status = status;
    res.set_content(dump_json(value), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
    send_json(res, error_json(status, message), status);
}

// Runs a handler; its ApiError becomes the error JSON with its status, a
// kiln::Error (a template's raise_exception, a bad token) a 400, and
// anything else a 500 — the server itself goes on.
template <typename Handler>
auto guarded(Handler handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) {
        try {
            handler(req, res);
        } catch (const ApiError& e) {
            send_error(res, e.status(), e.what());
        } catch (const kiln::Error& e) {
            send_error(res, 400, e.what());
        } catch (const std::bad_alloc&) {
            send_error(res, 500, "out of memory");
        } catch (const std::exception& e) {
            send_error(res, 500, e.what());
        }
    };
}

bool write(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

}  // namespace

class HttpApi::Busy {
public:
    explicit Busy(HttpApi& api) : api_(api) {
        std::lock_guard lock(api_.busy_mutex_);
        ++api_.in_flight_;
    }
    ~Busy() {
        {
            std::lock_guard lock(api_.busy_mutex_);
            --api_.in_flight_;
        }
        api_.idle_.notify_all();
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

private:
    HttpApi& api_;
};

HttpApi::HttpApi(const ApiSettings& settings, const ModelInfo& info, const Tokenizer& tokenizer, const ChatTemplate& chat,
                 const ModelChatTemplate& chat_tokens, SlotScheduler& scheduler)
    : settings_(settings), info_(info), tokenizer_(tokenizer), chat_(chat), chat_tokens_(chat_tokens), scheduler_(scheduler) {}

bool HttpApi::wait_idle(int64_t timeout_ms) {
    std::unique_lock lock(busy_mutex_);
    return idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return in_flight_ == 0; });
}

std::string HttpApi::render_chat(const Json& messages, bool add_generation_prompt) const {
    ChatTemplateOptions options;
    options.bos_token = chat_tokens_.bos_token;
    options.eos_token = chat_tokens_.eos_token;
    options.add_generation_prompt = add_generation_prompt;
    return chat_.apply(messages, options);
}

std::vector<int32_t> HttpApi::chat_tokens(const Json& messages) const {
    return chat_prompt_tokens(tokenizer_, render_chat(messages, true));
}

void HttpApi::install(httplib::Server& server) {
    server.set_payload_max_length(settings_.max_body_bytes);

    // Every answer of 400 and above without a body of its own (an unknown
    // path, a body over the limit) gets the error JSON.
    server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string message = "error";
        if (res.status == 404) message = "no such endpoint";
        else if (res.status == 413) message = "the request body is larger than the server accepts (--max-body-bytes)";
        else if (res.status == 405) message = "method not allowed";
        else if (res.status == 400) message = "bad request";
        send_error(res, res.status, message);
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, 500, "internal error");
    });
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        using R = httplib::Server::HandlerResponse;
        // /health answers load balancers without a key; / is the static chat
        // page (a browser cannot send a key to load it; its requests do).
        if (req.path == "/health" || (req.path == "/" && req.method == "GET" && settings_.web_ui)) return R::Unhandled;
        if (shutting_down_) {
            send_error(res, 503, "the server is shutting down");
            return R::Handled;
        }
        if (!settings_.api_keys.empty()) {
            const std::string auth = req.get_header_value("Authorization");
            const bool known = std::any_of(settings_.api_keys.begin(), settings_.api_keys.end(),
                                           [&](const std::string& key) { return auth == "Bearer " + key; });
            if (!known) {
                send_error(res, 401, auth.empty() ? "an API key is required (Authorization: Bearer KEY)" : "invalid API key");
                return R::Handled;
            }
        }
        return R::Unhandled;
    });

    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (shutting_down_) send_error(res, 503, "the server is shutting down");
        else send_json(res, {{"status", "ok"}});
    });
    if (settings_.web_ui)
        server.Get("/", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
        });

    const auto models = guarded([this](const httplib::Request&, httplib::Response& res) {
        Json model = {{"id", settings_.model_id},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "kiln"},
                      {"meta",
                       {{"architecture", info_.architecture},
                        {"n_vocab", info_.n_vocab},
                        {"n_ctx_train", info_.n_ctx_train},
                        {"n_ctx_slot", scheduler_.n_ctx_per_slot()},
                        {"n_params", info_.parameters},
                        {"size", info_.weight_bytes}}}};
        send_json(res, {{"object", "list"}, {"data", Json::array({model})}});
    });
    server.Get("/v1/models", models);
    server.Get("/models", models);

    server.Get("/slots", guarded([this](const httplib::Request&, httplib::Response& res) {
        Json slots = Json::array();
        for (const SlotStatus& s : scheduler_.slots())
            slots.push_back({{"id", s.id},
                             {"state", s.busy ? "busy" : "idle"},
                             {"is_processing", s.busy},
                             {"n_ctx", s.n_ctx},
                             {"n_past", s.n_past},
                             {"n_prompt_tokens", s.prompt_tokens},
                             {"n_decoded", s.generated}});
        send_json(res, slots);
    }));

    // llama-server's GET /props: what a request gets by default, the slots,
    // the model file and its chat template (clients read n_ctx from it).
    server.Get("/props", guarded([this](const httplib::Request&, httplib::Response& res) {
        const SamplerParams& s = settings_.sampling;
        const Json params = {{"n_predict", settings_.default_max_tokens},
                             {"temperature", s.temperature},
                             {"top_k", s.top_k},
                             {"top_p", s.top_p},
                             {"min_p", s.min_p},
                             {"repeat_penalty", s.repeat_penalty},
                             {"repeat_last_n", s.repeat_last_n},
                             {"presence_penalty", s.presence_penalty},
                             {"frequency_penalty", s.frequency_penalty},
                             {"seed", settings_.seed_given ? static_cast<int64_t>(s.seed) : int64_t{-1}}};
        send_json(res, {{"default_generation_settings", {{"n_ctx", scheduler_.n_ctx_per_slot()}, {"params", params}}},
                        {"total_slots", static_cast<int64_t>(scheduler_.slots().size())},
                        {"model_path", settings_.model_path},
                        {"chat_template", chat_tokens_.source},
                        {"build_info", std::string(cli::build_commit())}});
    }));

    server.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const Json body = parse_json_body(req.body);
        const auto content = body.find("content");
        if (content == body.end() || !content->is_string()) bad_request("'content' must be a string");
        bool add_special = false, with_pieces = false;
        if (body.contains("add_special")) {
            if (!body["add_special"].is_boolean()) bad_request("'add_special' must be true or false");
            add_special = body["add_special"].get<bool>();
        }
        if (body.contains("with_pieces")) {
            if (!body["with_pieces"].is_boolean()) bad_request("'with_pieces' must be true or false");
            with_pieces = body["with_pieces"].get<bool>();
        }
        EncodeOptions options = tokenizer_.prompt_options(true);
        if (!add_special) options.add_bos = options.add_eos = false;
        const std::vector<int32_t> ids = tokenizer_.encode(content->get<std::string>(), options);
        Json tokens = Json::array();
        for (int32_t id : ids) {
            if (with_pieces) tokens.push_back({{"id", id}, {"piece", tokenizer_.piece(id)}});
            else tokens.push_back(id);
        }
        send_json(res, {{"tokens", tokens}});
    }));

    server.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const Json body = parse_json_body(req.body);
        const auto tokens = body.find("tokens");
        if (tokens == body.end() || !tokens->is_array()) bad_request("'tokens' must be a list of token ids");
        std::vector<int32_t> ids;
        for (const Json& t : *tokens) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= info_.n_vocab)
                bad_request("'tokens' must hold token ids between 0 and {}", info_.n_vocab - 1);
            ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
        }
        send_json(res, {{"content", tokenizer_.decode(ids, true)}});
    }));

    server.Post("/apply-template", guarded([this](const httplib::Request& req, httplib::Response& res) {
        const Json body = parse_json_body(req.body);
        if (!body.contains("messages")) bad_request("'messages' is required");
        send_json(res, {{"prompt", render_chat(parse_messages(body["messages"]), true)}});
    }));

    for (const auto& [path, endpoint] : {std::pair{"/v1/chat/completions", Endpoint::Chat},
                                         std::pair{"/chat/completions", Endpoint::Chat},
                                         std::pair{"/v1/completions", Endpoint::Text},
                                         std::pair{"/completions", Endpoint::Text}}) {
        const Endpoint ep = endpoint;
        server.Post(path, guarded([this, ep](const httplib::Request& req, httplib::Response& res) { complete(req, res, ep); }));
    }
    // llama-server's own completion API: the request of /v1/completions
    // (prompt, n_predict, ...), its own answer and stream (native_final).
    server.Post("/completion", guarded([this](const httplib::Request& req, httplib::Response& res) {
        complete(req, res, Endpoint::Text, true);
    }));
}

void HttpApi::complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint, bool native) {
    auto busy = std::make_shared<Busy>(*this);
    const Json body = parse_json_body(req.body);
    RequestLimits limits;
    limits.default_max_tokens = settings_.default_max_tokens;
    limits.n_ctx_per_slot = scheduler_.n_ctx_per_slot();
    limits.n_vocab = info_.n_vocab;
    limits.sampling = settings_.sampling;
    limits.seed_given = settings_.seed_given;
    CompletionRequest request = parse_completion_request(body, endpoint, limits);
    if (native && request.params.top_logprobs >= 0)
        bad_request("'logprobs' is a field of /v1/completions; /completion's n_probs is not supported");

    std::vector<int32_t> prompt;
    if (endpoint == Endpoint::Chat) {
        prompt = chat_tokens(request.messages);
    } else if (request.prompt_is_tokens) {
        prompt = request.prompt_tokens;
    } else {
        prompt = tokenizer_.encode(request.prompt_text, tokenizer_.prompt_options(true));
    }
    if (prompt.empty()) {
        if (tokenizer_.bos() < 0) bad_request("the prompt is empty and the vocabulary has no BOS token to start from");
        prompt.push_back(tokenizer_.bos());
    }
    const int64_t n_ctx = scheduler_.n_ctx_per_slot();
    if (static_cast<int64_t>(prompt.size()) > n_ctx)
        bad_request("the prompt is {} tokens, more than the context of {} tokens a slot has (-c / -np)", prompt.size(), n_ctx);
    if (!request.seed_given) request.params.sampling.seed = std::random_device{}();

    const ResponseContext ctx =
        make_response_context(endpoint, settings_.model_id, request.params.top_logprobs >= 0, tokenizer_);
    const std::shared_ptr<RequestChannel> channel = scheduler_.submit(std::move(prompt), request.params);

    if (!request.stream) {
        // Waits for the whole reply. (cpp-httplib 0.11 tells a handler
        // nothing of its connection, so a client that leaves before a
        // non-streamed reply is done does not cancel it; streams do.)
        std::string text;
        std::vector<TokenLogprob> tokens;
        for (;;) {
            std::optional<GenerationEvent> event = channel->next_final(kPoll);
            if (!event) continue;
            text += event->text;
            for (auto& t : event->tokens) tokens.push_back(std::move(t));
            if (!event->done) continue;
            if (event->finish == FinishReason::Error) throw ApiError(503, event->error);
            send_json(res, native ? native_final(ctx, text, *event) : full_response(ctx, text, tokens, *event));
            return;
        }
    }

    struct Stream {
        std::shared_ptr<Busy> busy;
        std::shared_ptr<RequestChannel> channel;
        ResponseContext ctx;
        bool native = false;
        bool started = false;
        int64_t offset = 0;
    };
    auto stream = std::make_shared<Stream>(Stream{busy, channel, ctx, native});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream](size_t, httplib::DataSink& sink) {
            const auto gone = [&] {
                stream->channel->cancel();  // the client left: free its slot
                return false;
            };
            if (!stream->started) {
                stream->started = true;
                if (!stream->native) return write(sink, sse_event(first_chunk(stream->ctx))) ? true : gone();
            }
            std::optional<GenerationEvent> event = stream->channel->next(kPoll);
            if (!event) return sink.is_writable() ? true : gone();
            if (stream->native) {
                // llama-server's stream: {"content", "stop": false} pieces, then the whole answer's fields with "stop": true.
                if (event->done) {
                    const std::string last = event->finish == FinishReason::Error
                                                 ? sse_event(error_json(503, event->error))
                                                 : sse_event(native_final(stream->ctx, event->text, *event));
                    if (!write(sink, last)) return gone();
                    sink.done();
                } else if (!event->text.empty() && !write(sink, sse_event(native_chunk(event->text)))) {
                    return gone();
                }
                return true;
            }
            if (!event->text.empty() || !event->tokens.empty()) {
                if (!write(sink, sse_event(text_chunk(stream->ctx, *event, stream->offset)))) return gone();
                stream->offset += static_cast<int64_t>(event->text.size());
            }
            if (event->done) {
                const std::string last = event->finish == FinishReason::Error
                                             ? sse_event(error_json(503, event->error))
                                             : sse_event(final_chunk(stream->ctx, *event));
                if (!write(sink, last + std::string(kSseDone))) return gone();
                sink.done();
            }
            return true;
        },
        [stream](bool success) {
            if (!success) stream->channel->cancel();
        });
}

}  // namespace kiln::server
