// kiln-convert as a user runs it: output, exit status, one-line errors.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

using Run = test::ToolRun;

Run kiln_convert(const std::string& args) { return test::run_tool("kiln-convert", args); }

std::string quote(const std::filesystem::path& p) { return test::shell_quote(p.string()); }

void require_one_line_error(const Run& run, int status, std::string_view fragment) {
    INFO(run.err);
    CHECK(run.status == status);
    CHECK(run.out.empty());  // nothing half-printed on stdout
    REQUIRE(!run.err.empty());
    CHECK(run.err.find('\n') == run.err.size() - 1);
    CHECK(run.err.find(fragment) != std::string::npos);
}

}  // namespace

TEST_CASE("inspect shows the shared model's architecture, tensors and summary", "[cli]") {
    const Run run = kiln_convert("inspect " + quote(test::shared_models_dir() / "stories260K.gguf"));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.err.empty());
    CHECK(run.out.find("general.architecture") != std::string::npos);
    CHECK(run.out.find("[str; 512]") != std::string::npos);     // long array shown by its length
    CHECK(run.out.find("... 508 more") != std::string::npos);   // and abbreviated
    CHECK(run.out.find("blk.4.ffn_norm.weight") != std::string::npos);
    CHECK(run.out.find("[64, 512]") != std::string::npos);
    CHECK(run.out.find("summary: architecture llama, 48 tensors, 292,800 parameters, file size 1,185,376 bytes") !=
          std::string::npos);
    CHECK(run.out.find("kiln runs it: yes (llama)") != std::string::npos);
}

TEST_CASE("inspect says whether kiln runs the file, and if not, why", "[cli]") {
    const Run gpt2 = kiln_convert("inspect " + quote(test::fixtures_dir() / "gpt2" / "tiny_nobias.gguf"));
    REQUIRE(gpt2.status == 0);
    CHECK(gpt2.out.find("kiln runs it: yes (gpt2)") != std::string::npos);
    const Run seq2seq = kiln_convert("inspect " + quote(test::fixtures_dir() / "transformer" / "tiny_postln.gguf"));
    REQUIRE(seq2seq.status == 0);
    CHECK(seq2seq.out.find("kiln runs it: yes (transformer)") != std::string::npos);
    // A vocabulary-only file has no weights: inspect still shows it, and says what the loader would refuse.
    const Run vocab = kiln_convert("inspect " + quote(test::shared_models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf"));
    REQUIRE(vocab.status == 0);
    CHECK(vocab.out.find("kiln runs it: no: [model]") != std::string::npos);
    CHECK(vocab.out.find("holds only a vocabulary") != std::string::npos);
}

TEST_CASE("inspect works on files the writer produced", "[cli]") {
    test::TempDir dir;
    test::write_file(dir.path() / "sample.gguf", test::make_sample_gguf());
    const Run run = kiln_convert("inspect " + quote(dir.path() / "sample.gguf"));
    REQUIRE(run.status == 0);
    CHECK(run.out.find("\"héllo\\nworld\"") != std::string::npos);  // control bytes escaped
    CHECK(run.out.find("tensor.q") != std::string::npos);
    CHECK(run.out.find("q8_0") != std::string::npos);
    CHECK(run.out.find("summary: architecture kiln-sample, 3 tensors, 75 parameters") != std::string::npos);
}

TEST_CASE("malformed files give one clear line and exit status 1", "[cli]") {
    test::TempDir dir;
    const auto good = test::make_sample_gguf();
    auto check = [&](const std::string& name, const test::Bytes& bytes, std::string_view fragment) {
        const auto path = dir.path() / name;
        test::write_file(path, bytes);
        const Run run = kiln_convert("inspect " + quote(path));
        require_one_line_error(run, 1, fragment);
        CHECK(run.err.find(path.string()) != std::string::npos);  // names the file
    };
    check("empty.gguf", {}, "the file is empty");
    check("cut.gguf", test::Bytes(good.begin(), good.begin() + 100), "truncated");
    auto huge = good;
    test::patch<uint64_t>(huge, 16, uint64_t{1} << 62);
    check("huge-count.gguf", huge, "cannot fit");
    auto text = good;
    std::memcpy(text.data(), "PK\x03\x04", 4);
    check("zip.gguf", text, "not a GGUF file");
}

TEST_CASE("missing files, folders and bad usage", "[cli]") {
    test::TempDir dir;
    require_one_line_error(kiln_convert("inspect " + quote(dir.path() / "nope.gguf")), 1, "cannot open");
    require_one_line_error(kiln_convert("inspect " + quote(dir.path())), 1, "is a folder (a Hugging Face checkpoint?), not a GGUF file");
    require_one_line_error(kiln_convert(""), 2, "expected INPUT -o OUT.gguf, or a command");
    require_one_line_error(kiln_convert("frobnicate"), 2, "expected -o OUT.gguf");
    require_one_line_error(kiln_convert("--frobnicate"), 2, "unknown option '--frobnicate'");
    require_one_line_error(kiln_convert("inspect a b"), 2, "exactly one FILE");
    const Run help = kiln_convert("--help");
    CHECK(help.status == 0);
    CHECK(help.out.find("usage: kiln-convert") != std::string::npos);
}
