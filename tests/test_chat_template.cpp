// kiln's chat templates against Python's jinja2 set up as Hugging Face's
// apply_chat_template: every template of tests/fixtures/chat_templates/ on
// every conversation of expected.json (make_chat_template_fixtures.py) must
// render the identical text, or fail where jinja2 fails (with the template's
// own message when it called raise_exception).
#include <catch2/catch.hpp>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/chat/chat_template.h"
#include "support/error_check.h"
#include "support/paths.h"

namespace {

using nlohmann::ordered_json;

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::tm fixed_now() {
    std::tm t{};
    t.tm_year = 2024 - 1900;
    t.tm_mon = 6;
    t.tm_mday = 26;
    t.tm_hour = 10;
    t.tm_min = 30;
    const std::time_t seconds = timegm(&t);  // fills in the weekday and day of the year
    gmtime_r(&seconds, &t);
    return t;
}

// Where two texts first differ, with a little context, for the failure message.
std::string first_difference(const std::string& got, const std::string& want) {
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    const size_t from = i > 40 ? i - 40 : 0;
    const auto quoted = [](const std::string& text) {
        return ordered_json(text).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    };
    return "at byte " + std::to_string(i) + "\n  kiln:   " + quoted(got.substr(from, 100)) + "\n  jinja2: " + quoted(want.substr(from, 100));
}

}  // namespace

TEST_CASE("chat templates render as Hugging Face's jinja2 does", "[chat_template]") {
    const auto folder = kiln::test::fixtures_dir() / "chat_templates";
    const ordered_json fixture = ordered_json::parse(read_text(folder / "expected.json"));
    std::map<std::string, std::pair<int, int>> tally;  // template: passed, total
    std::map<std::string, std::unique_ptr<kiln::ChatTemplate>> templates;
    for (const ordered_json& c : fixture["cases"]) {
        const std::string name = c["template"];
        const ordered_json& conversation = fixture["conversations"][c["conversation"].get<std::string>()];
        INFO(name << " on " << c["conversation"].get<std::string>() << ", add_generation_prompt " << c["add_generation_prompt"]);
        if (!templates.count(name)) templates[name] = std::make_unique<kiln::ChatTemplate>(read_text(folder / name));
        kiln::ChatTemplateOptions options;
        options.bos_token = fixture["bos_token"];
        options.eos_token = fixture["eos_token"];
        options.add_generation_prompt = c["add_generation_prompt"];
        if (conversation.contains("tools")) options.tools = conversation["tools"];
        options.now = fixed_now();
        bool passed = false;
        std::string got, error;
        try {
            got = templates[name]->apply(conversation["messages"], options);
        } catch (const kiln::Error& e) {
            error = e.what();
        }
        std::string detail;
        if (c.contains("output")) {
            const std::string want = c["output"];
            detail = error.empty() ? first_difference(got, want) : "kiln error: " + error;
            passed = error.empty() && got == want;
        } else {
            detail = "jinja2 error (" + c["error_kind"].get<std::string>() + "): " + c["error"].get<std::string>() + "\nkiln: " + error;
            passed = !error.empty() && error.find('\n') == std::string::npos;
            if (c["error_kind"] == "raise_exception") passed = passed && error.find(c["error"].get<std::string>()) != std::string::npos;
        }
        INFO(detail);
        CHECK(passed);
        ++tally[name].second;
        if (passed) ++tally[name].first;
    }
    int passed = 0, total = 0;
    for (const auto& [name, counts] : tally) {
        std::printf("chat template %-55s %3d/%d\n", name.c_str(), counts.first, counts.second);
        passed += counts.first;
        total += counts.second;
    }
    std::printf("chat templates: %d/%d template x conversation cases identical to jinja2\n", passed, total);
    CHECK(total == 272);
}

TEST_CASE("chat template language pieces match jinja2", "[chat_template]") {
    // Small templates on odd corners (whitespace control, Python printing,
    // undefined values, slicing, filters, loops, macros, errors) from the same script.
    const ordered_json fixture = ordered_json::parse(read_text(kiln::test::fixtures_dir() / "chat_templates" / "expected.json"));
    const ordered_json& context = fixture["snippet_context"];
    int passed = 0, total = 0;
    for (const ordered_json& c : fixture["snippets"]) {
        const std::string source = c["template"];
        kiln::ChatTemplateOptions options;
        options.extra_context = context;
        options.now = fixed_now();
        std::string got, error;
        try {
            got = kiln::ChatTemplate(source).apply(ordered_json::array(), options);
        } catch (const kiln::Error& e) {
            error = e.what();
        }
        bool ok;
        std::string detail;
        if (c.contains("output")) {
            ok = error.empty() && got == c["output"].get<std::string>();
            detail = error.empty() ? first_difference(got, c["output"]) : "kiln error: " + error;
        } else {
            ok = !error.empty() && error.find('\n') == std::string::npos && error.find("template line ") != std::string::npos;
            if (c["error_kind"] == "raise_exception") ok = ok && error.find(c["error"].get<std::string>()) != std::string::npos;
            detail = "jinja2: " + c["error"].get<std::string>() + "\nkiln: " + error;
        }
        INFO("template: " << source);
        INFO(detail);
        CHECK(ok);
        passed += ok;
        ++total;
    }
    std::printf("chat template snippets: %d/%d identical to jinja2\n", passed, total);
}
