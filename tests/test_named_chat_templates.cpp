// --chat-template NAME: kiln's Jinja versions of the formats llama.cpp knows
// by name, held against what llama.cpp's llama_chat_apply_template writes
// (tests/reference/make_named_template_fixtures.py made the fixture).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/chat/chat_template.h"
#include "formats/chat/named_templates.h"
#include "support/error_check.h"
#include "support/paths.h"

using namespace kiln;

TEST_CASE("named chat templates write what llama.cpp's formatter of that name writes", "[chat_template][named]") {
    std::ifstream in(test::fixtures_dir() / "named_chat_templates.json");
    REQUIRE(in);
    const nlohmann::ordered_json fixture = nlohmann::ordered_json::parse(in);
    std::set<std::string> names;
    size_t equal = 0;
    for (const auto& c : fixture["cases"]) {
        const std::string name = c["name"];
        names.insert(name);
        const std::optional<std::string> source = named_chat_template(name);
        REQUIRE(source.has_value());
        ChatTemplateOptions options;
        options.add_generation_prompt = c["add_generation_prompt"];
        const std::string rendered = apply_chat_template(*source, c["messages"], options);
        INFO(name << ", add_generation_prompt " << options.add_generation_prompt << ", messages " << c["messages"].dump());
        CHECK(rendered == c["output"].get<std::string>());
        equal += rendered == c["output"].get<std::string>();
    }
    CHECK(equal == fixture["cases"].size());
    // Every name kiln lists is in the fixture, so none goes unchecked.
    const std::string listed = named_chat_template_names();
    size_t count = 1;
    for (char ch : listed) count += ch == ',';
    CHECK(count == names.size());
    for (const std::string& name : names) CHECK(listed.find(name) != std::string::npos);
}

TEST_CASE("kiln's --chat-template takes a name or a Jinja text, and refuses anything else by name", "[chat_template][named]") {
    CHECK(chat_template_from_flag("chatml") == std::string(chatml_template()));
    const std::string text = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
    CHECK(chat_template_from_flag(text) == text);
    CHECK(chat_template_from_flag("{{ messages[0]['content'] }}") == "{{ messages[0]['content'] }}");
    // A name llama.cpp has and kiln does not, and a typo: one error naming the value and the names.
    REQUIRE_ERROR(chat_template_from_flag("command-r"), "--chat-template 'command-r' is neither a template name kiln knows (chatml, ");
    REQUIRE_ERROR(chat_template_from_flag("chatm1"), "nor a Jinja template");
}
