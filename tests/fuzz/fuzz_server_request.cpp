// libFuzzer entry for kiln-server's request parsing: any bytes, taken as the
// body of a POST, go through what the routes do before the engine sees them —
// the JSON body, the completion request of either endpoint, the messages of a
// chat (or /apply-template) request, and those messages rendered by two real
// chat templates. Each step must succeed or throw ApiError (the HTTP 4xx the
// server answers) or kiln::Error (which the server also answers as 400).
// Anything else (a crash, a sanitizer report, nlohmann's own exceptions, which
// the server would answer as 500, a hang, a stack overflow) is a bug.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/chat/chat_template.h"
#include "tools/server/api_error.h"
#include "tools/server/completion_request.h"

namespace {

using Json = nlohmann::ordered_json;

std::string read_fixture(const char* name) {
    std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/fixtures/chat_templates/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// ChatML (the server's fallback) and a template that reads more of each
// message (roles, system prompt handling, tool fields).
const kiln::ChatTemplate& chatml() {
    static const kiln::ChatTemplate t{std::string(kiln::chatml_template())};
    return t;
}
const kiln::ChatTemplate& llama31() {
    static const kiln::ChatTemplate t{read_fixture("meta-llama-Llama-3.1-8B-Instruct.jinja")};
    return t;
}

void render(const Json& messages) {
    kiln::ChatTemplateOptions options;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.add_generation_prompt = true;
    options.limits.max_loop_iterations = 20000;
    options.limits.max_output_bytes = 1 << 20;
    for (const kiln::ChatTemplate* t : {&chatml(), &llama31()}) {
        try {
            (void)t->apply(messages, options);
        } catch (const kiln::Error&) {
            // a conversation the template refuses (raise_exception) or a limit
        }
    }
}

template <typename F>
void expect_rejection_or_success(F&& step) {
    try {
        step();
    } catch (const kiln::server::ApiError&) {
    } catch (const kiln::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    Json parsed;
    try {
        parsed = kiln::server::parse_json_body(body);
    } catch (const kiln::server::ApiError&) {
        return 0;
    }
    kiln::server::RequestLimits limits;
    limits.default_max_tokens = size % 3 == 0 ? -1 : 64;
    limits.n_ctx_per_slot = 2048;
    limits.n_vocab = 512;
    for (const auto endpoint : {kiln::server::Endpoint::Chat, kiln::server::Endpoint::Text}) {
        expect_rejection_or_success([&] {
            const kiln::server::CompletionRequest request = kiln::server::parse_completion_request(parsed, endpoint, limits);
            if (endpoint == kiln::server::Endpoint::Chat) render(request.messages);
        });
    }
    // /apply-template reads "messages" alone.
    if (parsed.contains("messages"))
        expect_rejection_or_success([&] { render(kiln::server::parse_messages(parsed["messages"])); });
    return 0;
}
