// NumPy .npz files (formats/checkpoint/npz_writer.h), read back by numpy itself
// with allow_pickle=False: float32 arrays of any rank, Unicode string arrays
// (bytes that are not UTF-8 become U+FFFD), headers on 64-byte boundaries.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/checkpoint/npz_writer.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

namespace kiln {

TEST_CASE("npz files load with numpy.load(allow_pickle=False)", "[npz][viz]") {
    test::TempDir dir;
    const std::filesystem::path path = dir.path() / "a.npz";
    {
        NpzWriter npz(path);
        const std::vector<float> values{0.5f, -1.25f, 3.0f, 1e-8f, 7.0f, -0.0f};
        const int64_t matrix[] = {2, 3}, vector[] = {6}, cube[] = {1, 2, 3};
        npz.add_float32("matrix", matrix, values);
        npz.add_float32("vector", vector, values);
        npz.add_float32("cube", cube, values);
        const std::vector<std::string> words{"a", "▁Once", "日本", "bad\xff!", ""};
        npz.add_strings("words", words);
        npz.commit();
    }
    const std::string script =
        "import sys, numpy as np\n"
        "d = np.load(sys.argv[1], allow_pickle=False)\n"
        "print(sorted(d.files))\n"
        "print(d['matrix'].dtype, d['matrix'].shape, d['matrix'][1].tolist(), d['vector'].shape, d['cube'].shape)\n"
        "print(d['words'].dtype, d['words'].tolist() == ['a', '\\u2581Once', '\\u65e5\\u672c', 'bad\\ufffd!', ''])\n";
    const auto run = test::run_command("/usr/bin/python3 -c " + test::shell_quote(script) + " " + test::shell_quote(path.string()));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out ==
          "['cube', 'matrix', 'vector', 'words']\n"
          "float32 (2, 3) [9.99999993922529e-09, 7.0, -0.0] (6,) (1, 2, 3)\n"
          "<U5 True\n");
}

TEST_CASE("npz headers are numpy's version 1.0 layout", "[npz][viz]") {
    const int64_t shape[] = {3};
    const std::string h = npy_header("<f4", shape);
    CHECK(h.size() % 64 == 0);
    CHECK(h.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    CHECK(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") == 10);
    CHECK(h.back() == '\n');
    const int64_t empty[] = {0, 4};
    CHECK(npy_header("<f4", empty).find("'shape': (0, 4)") != std::string::npos);
}

TEST_CASE("npz: a wrong value count is an error and no file is left", "[npz][viz]") {
    test::TempDir dir;
    const std::filesystem::path path = dir.path() / "b.npz";
    {
        NpzWriter npz(path);
        const int64_t shape[] = {2, 2};
        const std::vector<float> three{1, 2, 3};
        CHECK_THROWS_AS(npz.add_float32("x", shape, three), Error);
    }
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::is_empty(dir.path()));
    CHECK(utf8_code_points("a\xe2\x82") == U"a\uFFFD");
    CHECK(utf8_code_points("\xc0\xaf") == U"\uFFFD");  // overlong '/'
}

}  // namespace kiln
