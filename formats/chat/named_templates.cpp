#include "formats/chat/named_templates.h"

#include <array>
#include <utility>

#include "engine/core/error.h"
#include "formats/chat/chat_template.h"

namespace kiln {

namespace {

// Llama 2's [INST] format; the variants differ in three choices, set in front.
// The first turn opens without BOS (the tokenizer adds it), later ones with or
// without "<s>"; a system message is wrapped in <<SYS>> or merely put first.
constexpr std::string_view kLlama2Body =
    "{%- set ns = namespace(inside=true) -%}"
    "{{- '[INST] ' -}}"
    "{%- for message in messages -%}"
    "{%- set content = message['content'] | trim if strip_messages else message['content'] -%}"
    "{%- if not ns.inside -%}"
    "{%- set ns.inside = true -%}"
    "{{- '<s>[INST] ' if bos_inside else '[INST] ' -}}"
    "{%- endif -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{- '<<SYS>>\\n' + content + '\\n<</SYS>>\\n\\n' if system_block else content + '\\n' -}}"
    "{%- elif message['role'] == 'user' -%}"
    "{{- content + ' [/INST]' -}}"
    "{%- else -%}"
    "{{- content + '</s>' -}}"
    "{%- set ns.inside = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}";

// Mistral's v1, v3 and v3-tekken formats: where spaces go around [INST], and
// whether assistant messages are trimmed.
constexpr std::string_view kMistralBody =
    "{%- set ns = namespace(inside=false) -%}"
    "{%- for message in messages -%}"
    "{%- if not ns.inside -%}"
    "{{- lead + '[INST]' + trail -}}"
    "{%- set ns.inside = true -%}"
    "{%- endif -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{- message['content'] + '\\n\\n' -}}"
    "{%- elif message['role'] == 'user' -%}"
    "{{- message['content'] + lead + '[/INST]' -}}"
    "{%- else -%}"
    "{{- trail + (message['content'] | trim if trim_assistant else message['content']) + '</s>' -}}"
    "{%- set ns.inside = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}";

// Formats that write every message as before + role + middle + content + after,
// and a generation prompt after them.
std::string per_message(std::string_view before, std::string_view middle, std::string_view after,
                        std::string_view generation_prompt, bool trim_content = false) {
    return "{%- for message in messages -%}{{- '" + std::string(before) + "' + message['role'] + '" +
           std::string(middle) + "' + " + (trim_content ? "(message['content'] | trim)" : "message['content']") +
           " + '" + std::string(after) + "' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '" +
           std::string(generation_prompt) + "' -}}{%- endif -%}";
}

std::string with_settings(std::string_view settings, std::string_view body) {
    return std::string(settings) + std::string(body);
}

std::optional<std::string> build(std::string_view name) {
    if (name == "chatml") return std::string(chatml_template());
    if (name == "llama2")
        return with_settings("{%- set system_block = false -%}{%- set bos_inside = false -%}{%- set strip_messages = false -%}", kLlama2Body);
    if (name == "llama2-sys")
        return with_settings("{%- set system_block = true -%}{%- set bos_inside = false -%}{%- set strip_messages = false -%}", kLlama2Body);
    if (name == "llama2-sys-bos")
        return with_settings("{%- set system_block = true -%}{%- set bos_inside = true -%}{%- set strip_messages = false -%}", kLlama2Body);
    if (name == "llama2-sys-strip")
        return with_settings("{%- set system_block = true -%}{%- set bos_inside = false -%}{%- set strip_messages = true -%}", kLlama2Body);
    if (name == "mistral-v1")
        return with_settings("{%- set lead = ' ' -%}{%- set trail = ' ' -%}{%- set trim_assistant = false -%}", kMistralBody);
    if (name == "mistral-v3")
        return with_settings("{%- set lead = '' -%}{%- set trail = ' ' -%}{%- set trim_assistant = true -%}", kMistralBody);
    if (name == "mistral-v3-tekken")
        return with_settings("{%- set lead = '' -%}{%- set trail = '' -%}{%- set trim_assistant = false -%}", kMistralBody);
    if (name == "mistral-v7")
        return std::string(
            "{%- for message in messages -%}"
            "{%- if message['role'] == 'system' -%}{{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' -}}"
            "{%- elif message['role'] == 'user' -%}{{- '[INST] ' + message['content'] + '[/INST]' -}}"
            "{%- else -%}{{- ' ' + message['content'] + '</s>' -}}"
            "{%- endif -%}"
            "{%- endfor -%}");
    if (name == "phi3") return per_message("<|", "|>\\n", "<|end|>\\n", "<|assistant|>\\n");
    if (name == "phi4") return per_message("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>");
    if (name == "falcon3") return per_message("<|", "|>\\n", "\\n", "<|assistant|>\\n");
    if (name == "zephyr") return per_message("<|", "|>\\n", "<|endoftext|>\\n", "<|assistant|>\\n");
    if (name == "llama3")
        return per_message("<|start_header_id|>", "<|end_header_id|>\\n\\n", "<|eot_id|>",
                           "<|start_header_id|>assistant<|end_header_id|>\\n\\n", /*trim_content=*/true);
    if (name == "gemma")
        // Gemma has no system role: its text opens the next user turn.
        return std::string(
            "{%- set ns = namespace(system='') -%}"
            "{%- for message in messages -%}"
            "{%- if message['role'] == 'system' -%}"
            "{%- set ns.system = message['content'] | trim -%}"
            "{%- else -%}"
            "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
            "{{- '<start_of_turn>' + role + '\\n' -}}"
            "{%- if ns.system != '' and role != 'model' -%}"
            "{{- ns.system + '\\n\\n' -}}"
            "{%- set ns.system = '' -%}"
            "{%- endif -%}"
            "{{- (message['content'] | trim) + '<end_of_turn>\\n' -}}"
            "{%- endif -%}"
            "{%- endfor -%}"
            "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}");
    if (name == "vicuna" || name == "vicuna-orca")
        return std::string("{%- for message in messages -%}"
                           "{%- if message['role'] == 'system' -%}") +
               (name == "vicuna" ? "{{- message['content'] + '\\n\\n' -}}" : "{{- 'SYSTEM: ' + message['content'] + '\\n' -}}") +
               "{%- elif message['role'] == 'user' -%}{{- 'USER: ' + message['content'] + '\\n' -}}"
               "{%- elif message['role'] == 'assistant' -%}{{- 'ASSISTANT: ' + message['content'] + '</s>\\n' -}}"
               "{%- endif -%}"
               "{%- endfor -%}"
               "{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}";
    if (name == "deepseek3")
        return std::string(
            "{%- for message in messages -%}"
            "{%- if message['role'] == 'system' -%}{{- message['content'] + '\\n\\n' -}}"
            "{%- elif message['role'] == 'user' -%}{{- '<\xef\xbd\x9cUser\xef\xbd\x9c>' + message['content'] -}}"
            "{%- elif message['role'] == 'assistant' -%}"
            "{{- '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + message['content'] + '<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>' -}}"
            "{%- endif -%}"
            "{%- endfor -%}"
            "{%- if add_generation_prompt -%}{{- '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' -}}{%- endif -%}");
    return std::nullopt;
}

constexpr std::array kNames{"chatml",     "llama2",     "llama2-sys",        "llama2-sys-bos", "llama2-sys-strip",
                            "llama3",     "mistral-v1", "mistral-v3",        "mistral-v3-tekken", "mistral-v7",
                            "phi3",       "phi4",       "falcon3",           "zephyr",         "gemma",
                            "vicuna",     "vicuna-orca", "deepseek3"};

}  // namespace

std::optional<std::string> named_chat_template(std::string_view name) { return build(name); }

std::string named_chat_template_names() {
    std::string names;
    for (const char* name : kNames) names += (names.empty() ? "" : ", ") + std::string(name);
    return names;
}

std::string chat_template_from_flag(std::string_view value) {
    if (std::optional<std::string> named = named_chat_template(value)) return *named;
    if (value.find("{{") != std::string_view::npos || value.find("{%") != std::string_view::npos)
        return std::string(value);
    fail("chat", "--chat-template '{}' is neither a template name kiln knows ({}) nor a Jinja template", value,
         named_chat_template_names());
}

}  // namespace kiln
