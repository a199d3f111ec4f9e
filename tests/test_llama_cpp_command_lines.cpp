// Command lines copied from llama.cpp's README and docs (the February 2025
// snapshot the issues quote), run with kiln's programs: each one runs, or
// fails with exit status 2 and one line naming the one flag kiln does not have.
//
// What is changed, and only this: the program name (llama-cli -> kiln,
// llama-server -> kiln-server, llama-perplexity -> kiln-perplexity,
// llama-bench -> kiln-bench), model paths (-> stories260K, or a small llama
// fixture as a second model), file.txt (-> 20 KB of
// tinyshakespeare), llama-bench's implicit default model (-> -m stories260K),
// and a server's port (-> --port 0, a free one, so tests can run side by side).
// Programs that run until stopped (a server, generation with -n -1) are
// stopped after a few seconds; they count as running when they were still
// at work then.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

namespace {

using kiln::test::shell_quote;

enum class Expect {
    Runs,          // exits 0
    RunsUntilStopped,  // still at work when stopped (timeout's status 124)
    Refused,       // exit 2, one line naming `flag`
};

struct CommandLine {
    const char* source;  // where in llama.cpp's docs
    const char* line;    // as written there
    Expect expect;
    const char* flag = "";  // for Refused: the flag the error names
};

const std::vector<CommandLine> kCommandLines = {
    {"README.md:289", "llama-cli -m model.gguf", Expect::Runs},
    {"README.md:305", "llama-cli -m model.gguf -cnv --chat-template chatml", Expect::Runs},
    {"README.md:308", "llama-cli -m model.gguf -cnv --in-prefix 'User: ' --reverse-prompt 'User:'", Expect::Refused,
     "--in-prefix"},
    {"README.md:319", "llama-cli -m model.gguf -p \"I believe the meaning of life is\" -n 128 -no-cnv", Expect::Runs},
    {"README.md:330",
     "llama-cli -m model.gguf -n 256 --grammar-file grammars/json.gbnf -p 'Request: schedule a call at 8pm; Command:'",
     Expect::Refused, "--grammar-file"},
    {"README.md:350", "llama-server -m model.gguf --port 8080", Expect::RunsUntilStopped},
    {"README.md:363", "llama-server -m model.gguf -c 16384 -np 4", Expect::RunsUntilStopped},
    {"README.md:373", "llama-server -m model.gguf -md draft.gguf", Expect::Refused, "-md"},
    {"README.md:383", "llama-server -m model.gguf --embedding --pooling cls -ub 8192", Expect::Refused, "--embedding"},
    {"README.md:420", "llama-perplexity -m model.gguf -f file.txt", Expect::Runs},
    {"README.md:448", "llama-bench -m model.gguf", Expect::Runs},
    {"examples/main/README.md:30", "./llama-cli -m models/gemma-1.1-7b-it.Q4_K_M.gguf --prompt \"Once upon a time\"",
     Expect::Runs},
    {"examples/main/README.md:35", "./llama-cli -m models/gemma-1.1-7b-it.Q4_K_M.gguf -cnv --chat-template gemma",
     Expect::Runs},
    {"examples/main/README.md:40", "./llama-cli -m models/gemma-1.1-7b-it.Q4_K_M.gguf --ignore-eos -n -1",
     Expect::RunsUntilStopped},
    {"examples/llama-bench/README.md:80",
     "./llama-bench -m models/7B/ggml-model-q4_0.gguf -m models/13B/ggml-model-q4_0.gguf -p 0 -n 128,256,512",
     Expect::Runs},
    {"examples/llama-bench/README.md:95", "./llama-bench -n 0 -p 1024 -b 128,256,512,1024", Expect::Runs},
    {"examples/llama-bench/README.md:108", "./llama-bench -n 0 -n 16 -p 64 -t 1,2,4,8,16,32", Expect::Runs},
    {"examples/llama-bench/README.md:129", "./llama-bench -ngl 10,20,30,31,32,33,34,35", Expect::Runs},
    {"examples/llama-bench/README.md:267", "./llama-bench -o sql", Expect::Runs},
    {"docs/backend/CANN.md:249",
     "./build/bin/llama-cli -m path_to_model -p \"Building a website can be done in 10 simple steps:\" -n 400 -e -ngl 33 "
     "-sm none -mg 0",
     Expect::Runs},
    {"docs/build.md:309", "build/bin/Release/llama-cli -m \"[PATH TO MODEL]\" -ngl 100 -c 16384 -t 10 -n -2 -cnv",
     Expect::Runs},
    {"docs/build.md:365", "./bin/llama-cli -m \"PATH_TO_MODEL\" -p \"Hi you how are you\" -n 50 -e -ngl 33 -t 4",
     Expect::Runs},
    {"examples/server/README.md:261", "./llama-server -m models/7B/ggml-model.gguf -c 2048", Expect::RunsUntilStopped},
    {"examples/server/bench/README.md:36",
     "llama-server --host localhost --port 8080 --model ggml-model-q4_0.gguf --cont-batching --metrics --parallel 8 "
     "--batch-size 512 --ctx-size 4096 -ngl 33",
     Expect::Refused, "--metrics"},
    {"examples/server/README.md:1427", "llama-server --jinja -fa -hf bartowski/gemma-2-2b-it-GGUF:Q8_0", Expect::Refused,
     "-hf"},
};

// Replaces every `from` in `text` with `to`.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

// The command line with kiln's programs, models and files (see the top).
std::string rewrite(const std::string& line, const std::string& text_file) {
    std::string s = line;
    const size_t space = s.find(' ');
    std::string program = s.substr(0, space);
    program = program.substr(program.rfind('/') == std::string::npos ? 0 : program.rfind('/') + 1);
    std::string rest = s.substr(space);
    const std::string tool = program == "llama-cli" ? "kiln" : "kiln" + program.substr(5);
    const std::string model = shell_quote((kiln::test::shared_models_dir() / "stories260K.gguf").string());
    const std::string second = shell_quote((kiln::test::fixtures_dir() / "kv_cache" / "llama_hd32.gguf").string());
    replace_all(rest, " models/13B/ggml-model-q4_0.gguf", " " + second);
    for (const char* path : {"model.gguf", "models/gemma-1.1-7b-it.Q4_K_M.gguf", "models/7B/ggml-model-q4_0.gguf",
                             "path_to_model", "\"[PATH TO MODEL]\"", "\"PATH_TO_MODEL\"", "models/7B/ggml-model.gguf",
                             "ggml-model-q4_0.gguf"})
        replace_all(rest, std::string(" ") + path, " " + model);
    replace_all(rest, " file.txt", " " + shell_quote(text_file));
    replace_all(rest, "--port 8080", "--port 0");
    if (tool == "kiln-bench" && rest.find(" -m ") == std::string::npos) rest = " -m " + model + rest;
    if (tool == "kiln-server" && rest.find("--port") == std::string::npos) rest += " --port 0";
    return kiln::test::tool_command(tool) + rest;
}

size_t line_count(const std::string& text) {
    size_t n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

}  // namespace

TEST_CASE("command lines from llama.cpp's docs run in kiln, or name the one flag kiln lacks", "[cli][llama_cpp_flags]") {
    kiln::test::TempDir dir;
    const std::string text_file = (dir.path() / "file.txt").string();
    {
        std::ifstream in(kiln::test::shared_dir() / "data" / "tinyshakespeare.txt", std::ios::binary);
        std::string text(20000, '\0');
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        std::ofstream(text_file, std::ios::binary) << text;
    }
    REQUIRE(kCommandLines.size() >= 20);
    for (const CommandLine& c : kCommandLines) {
        const std::string command = rewrite(c.line, text_file);
        const bool stopped = c.expect == Expect::RunsUntilStopped;
        // Nothing on standard input: conversation mode ends at once. The
        // bound only catches a hang: under ASan on a loaded 2-core machine the
        // slowest of these commands came close to 120 s, so sanitized builds get
        // more, and so do builds run under qemu (llama-bench's pp1024 at four
        // batch sizes passed 120 s there).
        const bool slow = kiln::test::under_sanitizer() || kiln::test::under_emulator();
        const std::string bound = stopped ? "timeout 4 " : slow ? "timeout 900 " : "timeout 120 ";
        const kiln::test::ToolRun run = kiln::test::run_command(bound + command + " < /dev/null");
        INFO(c.source << ": " << c.line << "\nran: " << command << "\nstatus " << run.status << "\nstderr:\n" << run.err);
        switch (c.expect) {
            case Expect::Runs:
                CHECK(run.status == 0);
                break;
            case Expect::RunsUntilStopped:
                CHECK(run.status == 124);
                CHECK(run.err.find("unknown argument") == std::string::npos);
                break;
            case Expect::Refused:
                CHECK(run.status == 2);
                CHECK(run.err.find(fmt::format("unknown argument '{}'", c.flag)) != std::string::npos);
                CHECK(line_count(run.err) == 1);
                break;
        }
    }
}

TEST_CASE("llama.cpp's GPU flags are taken, checked, and ignored with one note", "[cli][llama_cpp_flags]") {
    const std::string model = shell_quote((kiln::test::shared_models_dir() / "stories260K.gguf").string());
    const auto run = kiln::test::run_tool("kiln", "-m " + model + " -p Once -n 4 -s 1 -ngl 99 -mg 0 -sm row -ts 3,1");
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.err.find("kiln: note: -ngl, -mg, -sm, -ts ignored: kiln runs on the CPU") != std::string::npos);
    // Same text with and without them: they change nothing.
    const auto plain = kiln::test::run_tool("kiln", "-m " + model + " -p Once -n 4 -s 1");
    CHECK(plain.out == run.out);
    const auto bad = kiln::test::run_tool("kiln", "-m " + model + " -p Once -n 4 -sm diagonal");
    CHECK(bad.status == 2);
    CHECK(bad.err.find("-sm must be none, layer or row, got 'diagonal'") != std::string::npos);
}
