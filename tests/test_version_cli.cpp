// --version on every program: kiln's version (as CMakeLists.txt's project()
// names it), the git commit (as git itself reports it), the build, and the
// kernel set chosen at run time; kiln-bench's build_commit field is the same commit.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/run_tool.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::string project_version() {
    std::ifstream in(test::source_dir() / "CMakeLists.txt");
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    REQUIRE(std::regex_search(s, m, std::regex(R"(project\(kiln VERSION ([0-9.]+))")));
    return m[1];
}

// The commit git reports for the source tree, or "" outside a git checkout.
std::string git_head() {
    const test::ToolRun run = test::run_command(fmt::format("git -C {} rev-parse HEAD", shell_quote(test::source_dir().string())));
    return run.status == 0 ? run.out.substr(0, run.out.find('\n')) : std::string();
}

// A build commit is HEAD's abbreviated hash, perhaps with -dirty ("unknown" without git).
void check_commit(const std::string& commit) {
    const std::string head = git_head();
    INFO("commit: " << commit << ", HEAD: " << head);
    if (head.empty()) {
        CHECK(commit == "unknown");
        return;
    }
    std::string hash = commit;
    if (hash.size() > 6 && hash.ends_with("-dirty")) hash.resize(hash.size() - 6);
    CHECK(hash.size() >= 7);
    CHECK(head.starts_with(hash));
}

}  // namespace

TEST_CASE("every tool prints --version: version, commit, build, kernel targets", "[cli][version]") {
    const std::string version = project_version();
    for (const char* tool : {"kiln", "kiln-convert", "kiln-perplexity", "kiln-bench", "kiln-tokenize", "kiln-train", "kiln-server",
                             "kiln-kernel-bench"}) {
        const std::filesystem::path path = std::string(tool) == "kiln-kernel-bench"
                                               ? std::filesystem::path(KILN_BENCH_DIR) / tool
                                               : test::tool_path(tool);
        const test::ToolRun run = test::run_command(test::program_command(path) + " --version");
        INFO(tool << ": " << run.out << run.err);
        CHECK(run.status == 0);
        CHECK(run.err.empty());
        std::smatch m;
        REQUIRE(std::regex_search(run.out, m, std::regex("^(\\S+) (\\S+) \\(commit (\\S+)\\)\nbuild: (\\S+), (.+)\n"
                                                         "kernel targets: (.+) \\(runnable on this CPU; built in: (.+)\\); "
                                                         "in use: (\\S+) \\(matmul (\\S+)\\)\n$")));
        CHECK(m[1] == tool);
        CHECK(m[2] == version);
        check_commit(m[3]);
        CHECK(m[4] == std::string(KILN_BUILD_TYPE_NAME));
        CHECK(std::string(m[6]).find(std::string(m[8])) != std::string::npos);  // the target in use is one of them
        CHECK(std::string(m[6]).ends_with("scalar"));                          // always there, last
        CHECK(std::string(m[7]).ends_with("scalar"));
    }
}

TEST_CASE("kiln --version names the kernel target KILN_KERNELS chose", "[cli][version]") {
    const test::ToolRun run = test::run_command("KILN_KERNELS=scalar " + test::tool_command("kiln") + " --version");
    CHECK(run.status == 0);
    CHECK(run.out.find("in use: scalar (matmul scalar)\n") != std::string::npos);
}

TEST_CASE("a kernel target the build lacks is one line and a failure, not a fallback", "[cli][version]") {
    const test::ToolRun run =
        test::run_command("KILN_KERNELS=avx9000 " + test::tool_command("kiln") + " --version");
    CHECK(run.status != 0);
    CHECK(run.out.empty());
    CHECK(run.err.starts_with("kiln: KILN_KERNELS=avx9000 names no kernel target of this build (it has: "));
    CHECK(run.err.ends_with(", scalar)\n"));
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
}

TEST_CASE("kiln-bench's build_commit is the git commit, as llama-bench's is", "[cli][bench][version]") {
    const std::string model = (test::shared_models_dir() / "stories260K.gguf").string();
    const test::ToolRun run = test::run_tool("kiln-bench", "-m " + shell_quote(model) + " -t 1 -r 1 -p 4 -n 0 -o json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    const auto records = nlohmann::json::parse(run.out);
    REQUIRE(records.size() == 1);
    check_commit(records[0]["build_commit"].get<std::string>());
}
