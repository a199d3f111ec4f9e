#include "formats/chat/chat_template.h"

#include "engine/core/error.h"
#include "formats/chat/template_parser.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln {

ChatTemplate::ChatTemplate(std::string_view source, const chat::RenderLimits& limits) {
    auto body = std::make_shared<chat::Body>(chat::parse_template(source, limits.max_nesting_depth));
    chat::check_builtin_names(*body);
    body_ = std::move(body);
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const {
    using chat::Value;
    chat::ValueDict variables;
    if (options.extra_context.is_object()) {
        for (const auto& [key, value] : options.extra_context.items()) variables.set(Value(key), Value::from_json(value));
    } else if (!options.extra_context.is_null()) {
        fail("chat", "extra template variables must be a JSON object, not {}", options.extra_context.type_name());
    }
    variables.set(Value("messages"), Value::from_json(messages));
    variables.set(Value("bos_token"), Value(options.bos_token));
    variables.set(Value("eos_token"), Value(options.eos_token));
    variables.set(Value("add_generation_prompt"), Value(options.add_generation_prompt));
    if (options.tools) variables.set(Value("tools"), Value::from_json(*options.tools));
    chat::RenderOptions render_options;
    render_options.limits = options.limits;
    render_options.now = options.now;
    return chat::render_template(*body_, variables, render_options);
}

std::string apply_chat_template(std::string_view tmpl, const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) {
    return ChatTemplate(tmpl, options.limits).apply(messages, options);
}

std::string apply_chat_template(std::string_view tmpl, const nlohmann::json& messages, const ChatTemplateOptions& options) {
    // nlohmann::json sorts object keys; the order a caller built is gone either way.
    return apply_chat_template(tmpl, nlohmann::ordered_json::parse(messages.dump()), options);
}

std::string_view chatml_template() {
    return "{%- for message in messages -%}\n"
           "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
           "{%- endfor -%}\n"
           "{%- if add_generation_prompt -%}\n"
           "{{- '<|im_start|>assistant\\n' -}}\n"
           "{%- endif -%}\n";
}

ModelChatTemplate model_chat_template(const GgufFile& file, const Tokenizer& tokenizer) {
    ModelChatTemplate out;
    const GgufValue* value = file.find("tokenizer.chat_template");
    const std::string* text = value ? value->as_string() : nullptr;
    if (text && !text->empty()) {
        out.source = *text;
    } else {
        out.source = std::string(chatml_template());
        out.is_fallback = true;
    }
    if (tokenizer.bos() >= 0) out.bos_token = tokenizer.token_text(tokenizer.bos());
    if (tokenizer.eos() >= 0) out.eos_token = tokenizer.token_text(tokenizer.eos());
    return out;
}

}  // namespace kiln
