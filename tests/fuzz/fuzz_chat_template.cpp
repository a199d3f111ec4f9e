// libFuzzer entry for the chat template interpreter: any input, taken as a
// template, must either render or throw kiln::Error, within the limits set
// below. Anything else (a crash, a sanitizer report, another exception type,
// a hang, a stack overflow, an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/chat/chat_template.h"

namespace {

const nlohmann::ordered_json& conversation() {
    static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi 🦙 \"quoted\"\n"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
        {"role": "tool", "content": "42"}
    ])");
    return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    kiln::ChatTemplateOptions options;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.add_generation_prompt = size % 2 == 0;
    options.tools = nlohmann::ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
    // Small limits keep each input fast; the limits themselves are what is tested.
    options.limits.max_loop_iterations = 20000;
    options.limits.max_output_bytes = 1 << 20;
    try {
        (void)kiln::apply_chat_template(source, conversation(), options);
    } catch (const kiln::Error&) {
        // the expected outcome for a template kiln cannot render
    }
    return 0;
}
