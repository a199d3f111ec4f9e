// kiln.h: chat templates, rendered with kiln's Jinja interpreter.
#include <nlohmann/json.hpp>

#include "capi/boundary.h"
#include "capi/handles.h"
#include "formats/chat/chat_prompt.h"
#include "formats/chat/chat_template.h"

using namespace kiln::capi;

extern "C" {

kiln_status kiln_chat_apply(const kiln_model* model, const char* tmpl, const kiln_chat_message* messages,
                            size_t n_messages, int32_t add_generation_prompt, char* buf, size_t capacity,
                            size_t* n_bytes) {
    return guard(__func__, [&] {
        const LoadedModel& m = *require(model, "model").loaded;
        if (n_messages > 0) require(messages, "messages");
        nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
        for (size_t i = 0; i < n_messages; ++i) {
            if (messages[i].role == nullptr || messages[i].content == nullptr)
                reject(KILN_ERROR_INVALID_ARGUMENT, "message {} has a NULL role or content", i);
            conversation.push_back({{"role", messages[i].role}, {"content", messages[i].content}});
        }
        const kiln::ModelChatTemplate model_template = kiln::model_chat_template(*m.file, *m.tokenizer);
        kiln::ChatTemplateOptions options;
        options.bos_token = model_template.bos_token;
        options.eos_token = model_template.eos_token;
        options.add_generation_prompt = add_generation_prompt != 0;
        const std::string_view source = tmpl != nullptr ? std::string_view(tmpl) : model_template.source;
        write_text(kiln::apply_chat_template(source, conversation, options), buf, capacity, n_bytes);
    });
}

kiln_status kiln_chat_tokenize(const kiln_model* model, const char* rendered, kiln_token* tokens, int32_t capacity,
                               int32_t* n_tokens) {
    return guard(__func__, [&] {
        const LoadedModel& m = *require(model, "model").loaded;
        require(rendered, "rendered");
        const std::vector<int32_t> ids = kiln::chat_prompt_tokens(*m.tokenizer, rendered);
        write_tokens(ids.data(), ids.size(), tokens, capacity, n_tokens);
    });
}

}  // extern "C"
