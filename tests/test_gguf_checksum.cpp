// The CRC-32 of a GGUF file's tensor data (what kiln-train's checkpoints
// carry): written as an ordinary u32 metadata key, checked by the reader when
// present, and any flipped data byte is caught.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/core/error.h"
#include "formats/gguf/gguf_checksum.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/io/crc32.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

std::vector<std::byte> pattern(size_t n) {
    std::vector<std::byte> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 7 + 3) & 255);
    return b;
}

}  // namespace

TEST_CASE("crc32 equals zlib's over lengths that are not whole words, and continues", "[io][crc32]") {
    // Expected values: python3 -c "import zlib; b=bytes((i*7+3)&255 for i in range(1000)); print(hex(zlib.crc32(b)), hex(zlib.crc32(b[:13])))"
    const auto b = pattern(1000);
    CHECK(crc32(b) == 0x17bc2a46u);
    CHECK(crc32(std::span(b).first(13)) == 0xa97ad5c1u);
    CHECK(crc32_update(crc32(std::span(b).first(13)), std::span(b).subspan(13)) == 0x17bc2a46u);
    CHECK(crc32({}) == 0u);
}

TEST_CASE("a GGUF with a tensor data checksum reads back, and a flipped byte is refused", "[gguf][hostile]") {
    const auto a = pattern(4 * 6), c = pattern(4 * 5);
    GgufWriter w;
    w.set("general.architecture", "test");
    w.add_tensor("a", DType::F32, {3, 2}, a);
    w.add_tensor("c", DType::F32, {5}, c);
    w.add_tensor_data_checksum();
    auto bytes = w.to_bytes();
    const GgufFile ok = GgufFile::parse(bytes, "ok.gguf");
    const GgufValue* stored = ok.find(kTensorDataChecksumKey);
    REQUIRE(stored != nullptr);
    REQUIRE(std::get_if<uint32_t>(&stored->value) != nullptr);
    std::vector<std::byte> both(a);
    both.insert(both.end(), c.begin(), c.end());
    CHECK(std::get<uint32_t>(stored->value) == crc32(both));  // the tensors' bytes in order, no padding

    for (size_t at : {ok.data_offset(), ok.data_offset() + ok.get_tensor("c").offset + 19}) {
        auto damaged = bytes;
        damaged[at] ^= std::byte{0x01};
        CHECK_THROWS_WITH(GgufFile::parse(damaged, "damaged.gguf"),
                          Catch::StartsWith("[gguf] damaged.gguf: the tensor data does not match its checksum"));
    }
}

TEST_CASE("a file without the checksum key is read as before", "[gguf][hostile]") {
    const auto a = pattern(8);
    GgufWriter w;
    w.add_tensor("a", DType::F32, {2}, a);
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "plain.gguf");
    CHECK(f.find(kTensorDataChecksumKey) == nullptr);
}

TEST_CASE("a checksum key of the wrong type is refused", "[gguf][hostile]") {
    const auto a = pattern(8);
    GgufWriter w;
    w.set(kTensorDataChecksumKey, GgufValue(uint64_t{1}));
    w.add_tensor("a", DType::F32, {2}, a);
    const auto bytes = w.to_bytes();
    CHECK_THROWS_WITH(GgufFile::parse(bytes, "typed.gguf"), Catch::Contains("(expected u32)"));
}

TEST_CASE("llama.cpp's gguf-py reads the checksum key and zlib agrees with it", "[gguf][hostile]") {
    const char* root = std::getenv("KILN_LLAMA_CPP_DIR");
    if (root == nullptr) {
        WARN("SKIPPED: set KILN_LLAMA_CPP_DIR to a llama.cpp checkout to read the file with its gguf-py");
        return;
    }
    const auto a = pattern(4 * 6), c = pattern(4 * 33);
    GgufWriter w;
    w.set("general.architecture", "test");
    w.add_tensor("a", DType::F32, {3, 2}, a);
    w.add_tensor("c", DType::F32, {33}, c);
    w.add_tensor_data_checksum();
    test::TempDir dir;
    const auto path = dir.path() / "checked.gguf";
    w.write(path);
    const auto script = dir.path() / "check.py";
    const std::string code =
        "import sys, zlib\n"
        "from gguf import GGUFReader\n"
        "r = GGUFReader(sys.argv[1])\n"
        "f = r.fields['kiln.checksum.tensor_data_crc32']\n"
        "stored = int(f.parts[f.data[0]][0])\n"
        "crc = 0\n"
        "for t in r.tensors: crc = zlib.crc32(t.data.tobytes(), crc)\n"
        "print(f.types[0].name, stored == crc, len(r.tensors))\n";
    test::write_file(script, std::as_bytes(std::span(code.data(), code.size())));
    const std::string command = "PYTHONPATH=" + test::shell_quote(std::string(root) + "/gguf-py") + " /usr/bin/python3 " +
                                test::shell_quote(script.string()) + " " + test::shell_quote(path.string()) + " > " +
                                test::shell_quote((dir.path() / "out").string());
    REQUIRE(std::system(command.c_str()) == 0);
    const auto out = test::read_file(dir.path() / "out");
    CHECK(std::string(reinterpret_cast<const char*>(out.data()), out.size()) == "UINT32 True 2\n");
}
