// kiln's conversation mode (-cnv), driven as a script would (one message per
// input line): its replies equal llama.cpp's greedy continuations of the
// conversation rendered by Python's jinja2 (tests/reference/
// make_conversation_fixtures.py), turn after turn, with only new tokens
// evaluated; the context fills, messages misbehave, flags conflict.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

const auto kModel = [] { return test::shared_models_dir() / "stories260K.gguf"; };

nlohmann::json expected() {
    std::ifstream in(test::fixtures_dir() / "conversation" / "expected.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

// Runs kiln with `lines` on its standard input.
test::ToolRun chat(const test::TempDir& dir, const std::vector<std::string>& lines, const std::string& args,
                   const std::filesystem::path& model = kModel()) {
    std::string input;
    for (const std::string& l : lines) input += l + "\n";
    const auto path = dir.path() / "input.txt";
    test::write_file(path, std::span(reinterpret_cast<const std::byte*>(input.data()), input.size()));
    return test::run_tool("kiln", "-m " + test::shell_quote(model.string()) + " " + args + " -t 1 < " +
                                      test::shell_quote(path.string()));
}

std::string qwen_template_flags(const nlohmann::json& e) {
    return "--chat-template-file " + test::shell_quote((test::source_dir() / e["template"].get<std::string>()).string()) +
           " -sys " + test::shell_quote(e["system"].get<std::string>());
}

}  // namespace

TEST_CASE("conversation replies equal llama.cpp's on the same rendered turns, the cache kept across turns", "[cli][conversation]") {
    const nlohmann::json e = expected();
    test::TempDir dir;
    std::vector<std::string> users;
    std::string replies;
    for (const auto& turn : e["turns"]) {
        users.push_back(turn["user"]);
        replies += turn["reply"].get<std::string>() + "\n";
    }
    const auto run = chat(dir, users, qwen_template_flags(e) + " -cnv --temp 0 -n " + std::to_string(e["n_predict"].get<int>()));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out == replies);
    // The second turn evaluated only what follows the cached first turn.
    CHECK_THAT(run.err, Catch::Contains(fmt::format("2 turns | prompts {} new tokens", e["prompt_tokens_evaluated"].get<int>())));
}

TEST_CASE("conversation mode: /exit, stop strings and the end of input end turns", "[cli][conversation]") {
    const nlohmann::json e = expected();
    test::TempDir dir;
    const std::string first_user = e["turns"][0]["user"], first_reply = e["turns"][0]["reply"];
    // -r cuts the reply where the text appears, and does not show it.
    const auto run = chat(dir, {first_user, "/exit", "never read"}, qwen_template_flags(e) + " --temp 0 -n 24 -r Jolly");
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out == first_reply.substr(0, first_reply.find("Jolly")) + "\n");
    CHECK_THAT(run.err, Catch::Contains("1 turns"));
}

TEST_CASE("conversation mode drops the oldest turns when the context is full, and refuses a message that cannot fit", "[cli][conversation]") {
    const nlohmann::json e = expected();
    test::TempDir dir;
    // The first turn's prompt and reply take about 100 tokens, the second prompt alone fits in 120.
    const auto run = chat(dir, {e["turns"][0]["user"], e["turns"][1]["user"], std::string(400, 'x'), "Hi"},
                          qwen_template_flags(e) + " --temp 0 -n 24 -c 120");
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK_THAT(run.err, Catch::Contains("the context of 120 tokens is full: the oldest 2 messages were dropped"));
    CHECK_THAT(run.err, Catch::Contains("more than the context holds (119): raise -c"));
    CHECK_THAT(run.err, Catch::Contains("3 turns"));  // the message that did not fit got no reply
}

TEST_CASE("a model with a chat template chats by default when no prompt is given", "[cli][conversation]") {
    const nlohmann::json e = expected();
    test::TempDir dir;
    const GgufFile file = GgufFile::open(kModel());
    GgufWriter w;
    for (const GgufEntry& entry : file.metadata()) w.set(entry.key, entry.value);
    std::ifstream in(test::source_dir() / e["template"].get<std::string>());
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    w.set("tokenizer.chat_template", GgufValue(source));
    for (const GgufTensor& t : file.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
    const auto model = dir.path() / "with_template.gguf";
    test::write_file(model, w.to_bytes());
    const auto run = chat(dir, {e["turns"][0]["user"]},
                          "-sys " + test::shell_quote(e["system"].get<std::string>()) + " --temp 0 -n 24", model);
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out == e["turns"][0]["reply"].get<std::string>() + "\n");
    CHECK_THAT(run.err, Catch::Contains("1 turns"));
    CHECK_THAT(run.err, !Catch::Contains("has no chat template"));
    // -no-cnv: plain generation from an empty prompt instead.
    const auto plain = chat(dir, {}, "-no-cnv --temp 0 -n 4", model);
    CHECK(plain.status == 0);
    CHECK_THAT(plain.err, !Catch::Contains("turns"));
}

TEST_CASE("conversation mode refuses what it cannot do, in one line", "[cli][conversation]") {
    test::TempDir dir;
    const auto bad_template = dir.path() / "bad.jinja";
    const std::string text = "{% for m in messages %}{{ m.content }";
    test::write_file(bad_template, std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()));
    struct Case {
        std::string args, message;
        int status;
    };
    const std::vector<Case> cases = {
        {"-cnv --chat-template-file " + test::shell_quote(bad_template.string()), "template line 1: tag", 1},
        {"-cnv --chat-template-file " + test::shell_quote((dir.path() / "missing.jinja").string()), "missing.jinja", 1},
        {"-cnv --beams 2", "--beams does not apply", 2},
        {"-no-cnv -sys hello", "-sys, --chat-template and --chat-template-file apply to conversation mode", 2},
        {"-cnv --no-special", "--no-special does not apply to conversation mode", 2},
        {"--beams 2 -n -1", "--beams needs a number of tokens", 2},
    };
    for (const Case& c : cases) {
        INFO(c.args);
        const auto run = chat(dir, {"hi"}, c.args);
        CHECK(run.status == c.status);
        CHECK_THAT(run.err, Catch::Contains(c.message));
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') <= 2);
    }
}

TEST_CASE("conversation mode with an encoder-decoder model is refused", "[cli][conversation]") {
    test::TempDir dir;
    const auto run = chat(dir, {"hi"}, "-cnv", test::fixtures_dir() / "transformer" / "tiny_preln.gguf");
    CHECK(run.status == 1);
    CHECK_THAT(run.err, Catch::Contains("conversation mode needs a decoder-only model"));
}

TEST_CASE("on a terminal, Ctrl-C stops the reply and a Ctrl-C at the prompt ends kiln", "[cli][conversation]") {
    // The terminal is a pseudo-terminal the script drives (Python's pty module); it exits 0 when kiln behaved.
    test::TempDir dir;
    const auto log = dir.path() / "log";
    const std::string command = fmt::format(
        "python3 {} {} {} >{} 2>&1", test::shell_quote((test::source_dir() / "tests" / "cli" / "kiln_chat_terminal.py").string()),
        test::shell_quote(test::tool_path("kiln").string()), test::shell_quote(kModel().string()),
        test::shell_quote(log.string()));
    const int status = std::system(command.c_str());
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(output);
    CHECK(status == 0);
    CHECK_THAT(output, Catch::Contains("ok"));
}
