#pragma once
// Chat templates: a model's tokenizer.chat_template (Jinja) rendered into the
// prompt text, as Hugging Face's apply_chat_template renders it — jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loopcontrols, tojson without ASCII escaping, raise_exception and
// strftime_now — with kiln's own interpreter (template_parser.h,
// template_renderer.h).
//
// The template sees `messages`, `bos_token`, `eos_token`,
// `add_generation_prompt`, `tools` only when given, and any extra variables.
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/chat/template_ast.h"
#include "formats/chat/template_renderer.h"

namespace kiln {

class GgufFile;
class Tokenizer;

struct ChatTemplateOptions {
    std::string bos_token;
    std::string eos_token;
    bool add_generation_prompt = false;
    // The `tools` variable; absent (undefined in the template) when not set.
    std::optional<nlohmann::ordered_json> tools;
    // More variables, e.g. {"date_string": "26 Jul 2024"} (an object; null for none).
    nlohmann::ordered_json extra_context;
    // What strftime_now formats; the current local time when absent (tests fix it).
    std::optional<std::tm> now;
    chat::RenderLimits limits;
};

// A template parsed once and rendered for many conversations.
class ChatTemplate {
public:
    // Throws kiln::Error("chat", ...) naming the construct and line for a
    // syntax error, an unclosed block, an unknown filter or test, or nesting
    // beyond limits.max_nesting_depth.
    explicit ChatTemplate(std::string_view source, const chat::RenderLimits& limits = {});

    // `messages` is a JSON array of {"role": ..., "content": ...} objects
    // (any JSON the template reads). Throws kiln::Error("chat", ...) for a
    // rendering error, the template's own raise_exception("...") included.
    std::string apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const;

private:
    std::shared_ptr<const chat::Body> body_;
};

std::string apply_chat_template(std::string_view tmpl, const nlohmann::ordered_json& messages, const ChatTemplateOptions& options);
std::string apply_chat_template(std::string_view tmpl, const nlohmann::json& messages, const ChatTemplateOptions& options);

// ChatML (<|im_start|>role\ncontent<|im_end|>\n), the template used when a model has none.
std::string_view chatml_template();

// A model's template and the texts of its BOS and EOS tokens.
struct ModelChatTemplate {
    std::string source;
    std::string bos_token;
    std::string eos_token;
    bool is_fallback = false;  // the file has no tokenizer.chat_template: source is ChatML
};

// Reads tokenizer.chat_template from `file` (ChatML when absent, with
// is_fallback set so that callers can say so) and the BOS/EOS texts from
// `tokenizer` (empty when the vocabulary has none).
ModelChatTemplate model_chat_template(const GgufFile& file, const Tokenizer& tokenizer);

}  // namespace kiln
