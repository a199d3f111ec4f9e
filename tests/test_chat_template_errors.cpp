// Chat template failures: what kiln cannot render, malformed templates and
// hostile ones (deep nesting, huge loops, runaway output) end in one
// kiln::Error line that names the construct, the template line and, for a
// limit, the limit; plus the API around the interpreter (a GGUF's template,
// the ChatML fallback).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/chat/chat_template.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/error_check.h"

using nlohmann::ordered_json;

namespace {

std::string render(const std::string& source, const ordered_json& messages = ordered_json::array(),
                   const kiln::ChatTemplateOptions& options = {}) {
    return kiln::apply_chat_template(source, messages, options);
}

std::string repeat(std::string_view piece, size_t times) {
    std::string out;
    for (size_t i = 0; i < times; ++i) out += piece;
    return out;
}

}  // namespace

TEST_CASE("chat template syntax errors name the construct and the line", "[chat_template]") {
    REQUIRE_ERROR(render("a\nb\n{{ x | frobnicate }}"), "template line 3: no filter named 'frobnicate'");
    // jinja2 refuses an unknown filter even in a branch that never runs.
    REQUIRE_ERROR(render("{% if false %}\n{{ x | frobnicate }}{% endif %}"), "template line 2: no filter named 'frobnicate'");
    REQUIRE_ERROR(render("{{ 'a b'|wordwrap(1) }}"), "template line 1: filter 'wordwrap' is not supported");
    REQUIRE_ERROR(render("\n{{ '{}'.format(1) }}"), "template line 2: str.format() is not supported");
    REQUIRE_ERROR(render("{{ x is frobnicated }}"), "template line 1: no test named 'frobnicated'");
    REQUIRE_ERROR(render("x\n{% if true %}\nyes\n"), "template line 2: '{% if %}' is never closed (expected '{% endif %}'");
    REQUIRE_ERROR(render("{% for m in messages %}\n{% if m %}{% endfor %}"),
                  "template line 2: unexpected '{% endfor %}': the '{% if %}' opened on line 2 needs '{% endif %}' first");
    REQUIRE_ERROR(render("\n\n{{ messages"), "template line 3: tag '{{' is never closed with '}}'");
    REQUIRE_ERROR(render("{% if x"), "template line 1: tag '{%' is never closed with '%}'");
    REQUIRE_ERROR(render("\n{# never closed"), "template line 2: comment '{#' is never closed");
    REQUIRE_ERROR(render("{{ 1 + }}"), "template line 1: expected an expression but the tag ends");
    REQUIRE_ERROR(render("{{ 'abc }}"), "string literal is never closed");
    REQUIRE_ERROR(render("\n{{ a b }}"), "template line 2: unexpected 'b' in '{{ }}'");
    REQUIRE_ERROR(render("{{ a ! b }}"), "template line 1: unexpected character '!'");
    REQUIRE_ERROR(render("{% endfor %}"), "template line 1: '{% endfor %}' without a block to close");
    REQUIRE_ERROR(render("{% include 'other.jinja' %}"), "template line 1: statement 'include' is not supported");
    REQUIRE_ERROR(render("{% extends 'base' %}"), "statement 'extends' is not supported");
    REQUIRE_ERROR(render("{% raw %}x{% endraw %}"), "statement 'raw' is not supported");
    REQUIRE_ERROR(render("{% for x in y recursive %}{% endfor %}"), "recursive for loops are not supported");
    REQUIRE_ERROR(render("{% break %}"), "template line 1: 'break' outside a for loop");
    REQUIRE_ERROR(render("{{ f(*args) }}"), "'*' and '**' arguments are not supported");
    REQUIRE_ERROR(render("{% set %}"), "expected a name to set");
    REQUIRE_ERROR(render("{% macro m(a %}{% endmacro %}"), "template line 1: unexpected '}' (expected ')' to close the '(' of line 1)");
    REQUIRE_ERROR(render("{{ [1, 2\n\n"), "template line 1: '[' is never closed");
    REQUIRE_ERROR(render("{% macro m(a b) %}{% endmacro %}"), "expected ',' between parameters");
    REQUIRE_ERROR(render("{{ }}"), "empty expression");
    REQUIRE_ERROR(render("{{ x[] }}"), "empty subscript");
    REQUIRE_ERROR(render("{{ 99999999999999999999 }}"), "integer literal 99999999999999999999 is too large");
}

TEST_CASE("chat template rendering errors name the line", "[chat_template]") {
    REQUIRE_ERROR(render("\n{{ raise_exception('Only user and assistant roles are supported!') }}"),
                  "template line 2: raise_exception: Only user and assistant roles are supported!");
    REQUIRE_ERROR(render("{{ messages[0].content.foo }}", ordered_json::array()), "template line 1: 'list object' has no element 0");
    REQUIRE_ERROR(render("{{ nothing.attr }}"), "template line 1: 'nothing' is undefined");
    REQUIRE_ERROR(render("{{ 'a' + 1 }}"), "unsupported operand type(s) for +: 'str' and 'int'");
    REQUIRE_ERROR(render("{{ [1].append(2) }}"), "access to attribute 'append' of 'list' object is unsafe");
    REQUIRE_ERROR(render("{{ 2 ** 64 }}"), "integer overflow");
    REQUIRE_ERROR(render("{{ '%s' % 1 }}"), "printf-style '%' formatting of strings is not supported");
    REQUIRE_ERROR(render("{% set x = 1 %}{% set x.a = 2 %}"), "cannot assign attribute on non-namespace object 'x'");
    REQUIRE_ERROR(render("{{ 'x'|tojson(sort_keys=true) }}"), "tojson() got an unexpected keyword argument 'sort_keys'");
}

TEST_CASE("hostile chat templates fail cleanly at a named limit", "[chat_template]") {
    // Nesting: parentheses, unary operators, blocks, long operator chains.
    REQUIRE_ERROR(render("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), "nesting deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ " + repeat("not ", 100000) + "1 }}"), "nesting deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ " + repeat("-", 100000) + "1 }}"), "nesting deeper than the limit of 256 levels");
    REQUIRE_ERROR(render(repeat("{% if true %}", 100000)), "nesting deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ 1" + repeat(" + 1", 100000) + " }}"), "expression nested deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ x" + repeat(".a", 100000) + " }}"), "expression nested deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ x" + repeat("|trim", 100000) + " }}"), "expression nested deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), "nesting deeper than the limit of 256 levels");
    // Loops and ranges.
    REQUIRE_ERROR(render("{% for i in range(10**9) %}{% endfor %}"), "range too big: the sandbox allows at most 100000 items");
    REQUIRE_ERROR(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
                  "template line 1: more than the limit of 1000000 loop iterations");
    // Output and values.
    REQUIRE_ERROR(render("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"), "output longer than the limit of 16777216 bytes");
    REQUIRE_ERROR(render("{{ 'x' * 10**12 }}"), "value larger than the limit of 16777216 bytes");
    REQUIRE_ERROR(render("{{ [1, 2] * 10**12 }}"), "value larger than the limit");
    REQUIRE_ERROR(render("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
                  "value larger than the limit");
    REQUIRE_ERROR(render("{% set ns = namespace(l=[]) %}{% for i in range(10000) %}{% set ns.l = [ns.l] %}{% endfor %}"),
                  "value nested deeper than the limit of 256 levels");
    REQUIRE_ERROR(render("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                  "value larger than the limit");
    REQUIRE_ERROR(render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"), "a namespace stored inside a namespace is not supported");
    // Recursion.
    REQUIRE_ERROR(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "macro calls nested deeper than the limit of 128");
    // The limits are options.
    kiln::ChatTemplateOptions small;
    small.limits.max_loop_iterations = 10;
    REQUIRE_ERROR(render("{% for i in range(11) %}{% endfor %}", ordered_json::array(), small), "more than the limit of 10 loop iterations");
    small.limits.max_output_bytes = 5;
    REQUIRE_ERROR(render("123456", ordered_json::array(), small), "output longer than the limit of 5 bytes");
}

TEST_CASE("chat template API: variables, options and the ChatML fallback", "[chat_template]") {
    const ordered_json messages = ordered_json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
    kiln::ChatTemplateOptions options;
    options.add_generation_prompt = true;
    CHECK(render(std::string(kiln::chatml_template()), messages, options) ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    options.add_generation_prompt = false;
    CHECK(render(std::string(kiln::chatml_template()), messages, options) ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    // nlohmann::json (sorted keys) is accepted too.
    CHECK(kiln::apply_chat_template("{{ messages[0] }}", nlohmann::json::parse(R"([{"b": 1, "a": 2}])"), options) == "{'a': 2, 'b': 1}");
    // tools is undefined unless given; extra variables reach the template.
    CHECK(render("{{ tools is defined }}") == "False");
    options.tools = ordered_json::array({{{"name", "f"}}});
    options.extra_context = {{"date_string", "1 Jan 2025"}};
    options.bos_token = "<B>";
    CHECK(render("{{ bos_token }}{{ tools[0].name }} {{ date_string }} {{ add_generation_prompt }}", messages, options) == "<B>f 1 Jan 2025 False");
    options.extra_context = 5;
    REQUIRE_ERROR(render("x", messages, options), "extra template variables must be a JSON object");
    // One parse, many conversations.
    const kiln::ChatTemplate chat("{% for m in messages %}{{ m.role[0] }}{% endfor %}");
    CHECK(chat.apply(messages, {}) == "su");
    CHECK(chat.apply(ordered_json::array(), {}) == "");
}

TEST_CASE("a GGUF's chat template and special tokens, or ChatML when it has none", "[chat_template]") {
    const auto tokenizer_file = [](bool with_template) {
        kiln::GgufWriter w;
        w.set("tokenizer.ggml.model", "char");
        w.set("tokenizer.ggml.tokens", kiln::gguf_array<std::string>(kiln::GgufType::STRING, {"<pad>", "<|begin|>", "<|end|>", "a", "b"}));
        w.set("tokenizer.ggml.token_type", kiln::gguf_array<int32_t>(kiln::GgufType::INT32, {3, 3, 3, 1, 1}));
        w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
        w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
        if (with_template) w.set("tokenizer.chat_template", "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}");
        return w.to_bytes();
    };
    const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "ab"}])");
    {
        const std::vector<std::byte> bytes = tokenizer_file(true);
        const kiln::GgufFile file = kiln::GgufFile::parse(bytes, "with_template.gguf");
        const auto tokenizer = kiln::load_tokenizer(file);
        const kiln::ModelChatTemplate model = kiln::model_chat_template(file, *tokenizer);
        CHECK_FALSE(model.is_fallback);
        CHECK(model.bos_token == "<|begin|>");
        CHECK(model.eos_token == "<|end|>");
        kiln::ChatTemplateOptions options;
        options.bos_token = model.bos_token;
        options.eos_token = model.eos_token;
        CHECK(render(model.source, messages, options) == "<|begin|>ab<|end|>");
    }
    {
        const std::vector<std::byte> bytes = tokenizer_file(false);
        const kiln::GgufFile file = kiln::GgufFile::parse(bytes, "without_template.gguf");
        const auto tokenizer = kiln::load_tokenizer(file);
        const kiln::ModelChatTemplate model = kiln::model_chat_template(file, *tokenizer);
        CHECK(model.is_fallback);
        CHECK(model.source == kiln::chatml_template());
    }
}
