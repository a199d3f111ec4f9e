// The GGUF writer: exact round trips, llama.cpp-identical layout, atomic writes.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/io/atomic_file.h"
#include "support/paths.h"
#include "support/sample_gguf.h"

using namespace kiln;
using kiln::test::shared_models_dir;

namespace {

// A writer holding everything `f` holds, in the same order.
GgufWriter copy_of(const GgufFile& f) {
    GgufWriter w;
    for (const GgufEntry& e : f.metadata()) w.set(e.key, e.value);
    for (const GgufTensor& t : f.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data);
    return w;
}

}  // namespace

TEST_CASE("write then read gives identical metadata, tensors and bytes", "[gguf][writer]") {
    const auto bytes = test::make_sample_gguf();
    const GgufFile first = GgufFile::parse(bytes, "sample");
    const auto again = copy_of(first).to_bytes();
    CHECK(again == bytes);
    const GgufFile second = GgufFile::parse(again, "again");
    REQUIRE(second.metadata().size() == first.metadata().size());
    for (size_t i = 0; i < first.metadata().size(); ++i) {
        CHECK(second.metadata()[i].key == first.metadata()[i].key);
        CHECK(second.metadata()[i].value == first.metadata()[i].value);
    }
    for (const GgufTensor& t : first.tensors()) {
        const GgufTensor& u = second.get_tensor(t.name);
        CHECK(u.dims == t.dims);
        CHECK(u.type == t.type);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
}

TEST_CASE("rewriting llama.cpp's stories260K.gguf reproduces it byte for byte", "[gguf][writer]") {
    const GgufFile f = GgufFile::open(shared_models_dir() / "stories260K.gguf");
    const auto rewritten = copy_of(f).to_bytes();
    REQUIRE(rewritten.size() == f.file_size());
    CHECK(std::equal(rewritten.begin(), rewritten.end(), f.bytes().begin()));
}

TEST_CASE("rewriting llama.cpp's vocabulary-only files reproduces them byte for byte", "[gguf][writer]") {
    for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
        INFO(name);
        const GgufFile f = GgufFile::open(shared_models_dir() / "vocab" / name);
        const auto rewritten = copy_of(f).to_bytes();
        REQUIRE(rewritten.size() == f.file_size());
        CHECK(std::equal(rewritten.begin(), rewritten.end(), f.bytes().begin()));
    }
}

TEST_CASE("write() goes to the target atomically and leaves no temporary files", "[gguf][writer]") {
    test::TempDir dir;
    const auto target = dir.path() / "out.gguf";
    const auto bytes = test::make_sample_gguf();
    const GgufFile sample = GgufFile::parse(bytes, "sample");
    copy_of(sample).write(target);
    CHECK(test::read_file(target) == bytes);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
}

TEST_CASE("an abandoned atomic write leaves the old file intact and no temporary", "[gguf][writer]") {
    test::TempDir dir;
    const auto target = dir.path() / "model.gguf";
    const auto old = test::make_sample_gguf();
    test::write_file(target, old);
    {
        AtomicFile file(target);
        const std::byte junk[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
        file.write(junk);
        CHECK(std::filesystem::exists(file.temp_path()));
        // destroyed without commit(): as when an exception unwinds a half-done write
    }
    CHECK(test::read_file(target) == old);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
}

TEST_CASE("writing into a missing folder fails with a clear error and creates nothing", "[gguf][writer]") {
    test::TempDir dir;
    GgufWriter w;
    w.set("general.architecture", "x");
    CHECK_THROWS_WITH(w.write(dir.path() / "missing" / "out.gguf"), Catch::Contains("cannot create"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "missing"));
}

TEST_CASE("the writer refuses inconsistent tensors and metadata", "[gguf][writer]") {
    GgufWriter w;
    std::vector<std::byte> data(10);
    CHECK_THROWS_WITH(w.add_tensor("t", DType::F32, {3}, data), Catch::Contains("needs 12 bytes, got 10"));
    CHECK_THROWS_WITH(w.add_tensor("q", DType::Q8_0, {31}, data), Catch::Contains("block size 32"));
    CHECK_THROWS_WITH(w.add_tensor("d", DType::F32, {1, 1, 1, 1, 1}, data), Catch::Contains("dimensions"));
    std::vector<std::byte> ok(12);
    w.add_tensor("t", DType::F32, {3}, ok);
    CHECK_THROWS_WITH(w.add_tensor("t", DType::F32, {3}, ok), Catch::Contains("added twice"));
    CHECK_THROWS_WITH(w.set("general.alignment", uint32_t{24}), Catch::Contains("power of two"));
    GgufArray mixed{GgufType::INT32, {GgufValue(int32_t{1}), GgufValue("x")}};
    CHECK_THROWS_WITH(w.set("k", mixed), Catch::Contains("holds a str element"));
}

TEST_CASE("a custom alignment is honoured for every tensor", "[gguf][writer]") {
    GgufWriter w;
    w.set("general.alignment", uint32_t{64});
    std::vector<std::byte> a(4 * 3), b(4 * 5);
    w.add_tensor("a", DType::F32, {3}, a);
    w.add_tensor("b", DType::F32, {5}, b);
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "aligned");
    CHECK(f.alignment() == 64);
    CHECK(f.data_offset() % 64 == 0);
    CHECK(f.get_tensor("b").offset == 64);
}

TEST_CASE("an interrupt during an atomic write removes the temporary file", "[gguf][writer]") {
    test::TempDir dir;
    const auto target = dir.path() / "interrupted.gguf";
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::signal(SIGINT, SIG_DFL);  // as in a tool; the test framework catches SIGINT itself
        AtomicFile file(target);
        const std::byte junk[4] = {};
        file.write(junk);
        std::raise(SIGINT);  // as Ctrl-C would, in the middle of the write
        std::_Exit(0);       // not reached: the default action ends the process
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    CHECK_FALSE(std::filesystem::exists(target));
    CHECK(std::filesystem::is_empty(dir.path()));
}
