#pragma once
// kiln-server's HTTP endpoints on cpp-httplib: authentication, body limits,
// JSON errors, and the handlers (completions stream as server-sent events
// while the scheduler generates). HTTP threads only parse, tokenize and wait;
// the model runs on the scheduler's engine thread.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "engine/models/causal_lm.h"
#include "formats/chat/chat_template.h"
#include "formats/tokenizer/tokenizer.h"
#include "tools/server/completion_request.h"
#include "tools/server/slot_scheduler.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace kiln::server {

struct ApiSettings {
    std::string model_id;
    std::string model_path;             // as given to -m (GET /props)
    std::vector<std::string> api_keys;  // empty: none required
    bool web_ui = true;                 // serve the chat page at /
    SamplerParams sampling;             // a request's defaults (the server's flags)
    bool seed_given = false;
    int64_t default_max_tokens = -1;
    size_t max_body_bytes = 8u << 20;
};

class HttpApi {
public:
    HttpApi(const ApiSettings& settings, const ModelInfo& info, const Tokenizer& tokenizer, const ChatTemplate& chat,
            const ModelChatTemplate& chat_tokens, SlotScheduler& scheduler);

    // Adds every route and handler to `server`.
    void install(httplib::Server& server);

    // After this, new requests get 503; streams already running go on until
    // the scheduler ends them (SIGTERM: this, scheduler.stop(), wait_idle()).
    void begin_shutdown() noexcept { shutting_down_ = true; }
    // Waits until no request is being answered, or `timeout_ms` passes.
    bool wait_idle(int64_t timeout_ms);

private:
    class Busy;  // counts a request in flight

    void complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint, bool native = false);
    std::vector<int32_t> chat_tokens(const nlohmann::ordered_json& messages) const;
    std::string render_chat(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;

    ApiSettings settings_;
    ModelInfo info_;
    const Tokenizer& tokenizer_;
    const ChatTemplate& chat_;
    ModelChatTemplate chat_tokens_;
    SlotScheduler& scheduler_;
    std::atomic<bool> shutting_down_{false};
    std::mutex busy_mutex_;
    std::condition_variable idle_;
    int64_t in_flight_ = 0;
};

}  // namespace kiln::server
