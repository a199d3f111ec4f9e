// --check-tensors: engine/quant/validate.h against ggml_validate_row_data's
// rules, with block layouts (sizes, scale offsets) taken from ggml-common.h
// rather than from kiln's own structs, and the tools' error lines.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "engine/quant/validate.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

// One block type as ggml-common.h lays it out (llama.cpp c392e509).
struct Layout {
    DType type;
    size_t block_bytes;
    std::vector<std::pair<size_t, std::string_view>> scales;  // fp16 scale fields: offset, name
};

const std::vector<Layout>& layouts() {
    static const std::vector<Layout> all = {
        {DType::Q4_0, 18, {{0, "d"}}},
        {DType::Q4_1, 20, {{0, "d"}, {2, "m"}}},
        {DType::Q5_0, 22, {{0, "d"}}},
        {DType::Q5_1, 24, {{0, "d"}, {2, "m"}}},
        {DType::Q8_0, 34, {{0, "d"}}},
        {DType::Q2_K, 84, {{80, "d"}, {82, "dmin"}}},  // scales[16] qs[64] d dmin
        {DType::Q3_K, 110, {{108, "d"}}},              // hmask[32] qs[64] scales[12] d
        {DType::Q4_K, 144, {{0, "d"}, {2, "dmin"}}},
        {DType::Q5_K, 176, {{0, "d"}, {2, "dmin"}}},
        {DType::Q6_K, 210, {{208, "d"}}},              // ql[128] qh[64] scales[16] d
        {DType::IQ4_NL, 18, {{0, "d"}}},
        {DType::IQ4_XS, 136, {{0, "d"}}},
    };
    return all;
}

// `blocks` blocks whose scales are 1.0 and whose other bytes are all 0xff
// (which would read as NaN if a scale were looked for in the wrong place).
std::vector<std::byte> valid_blocks(const Layout& l, size_t blocks) {
    std::vector<std::byte> data(l.block_bytes * blocks, std::byte{0xff});
    for (size_t b = 0; b < blocks; ++b)
        for (const auto& [offset, name] : l.scales) {
            const uint16_t one = 0x3c00;
            std::memcpy(data.data() + b * l.block_bytes + offset, &one, 2);
        }
    return data;
}

void set_u16(std::vector<std::byte>& data, size_t at, uint16_t v) { std::memcpy(data.data() + at, &v, 2); }

}  // namespace

TEST_CASE("find_invalid_block finds the first NaN or inf scale of every block type", "[check_tensors]") {
    for (const Layout& l : layouts()) {
        INFO(dtype_name(l.type));
        REQUIRE(type_traits(l.type).block_bytes == l.block_bytes);
        auto data = valid_blocks(l, 5);
        CHECK_FALSE(quant::find_invalid_block(l.type, data));
        for (const auto& [offset, name] : l.scales) {
            INFO(name);
            for (const uint16_t bad : {uint16_t(0x7e00), uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7c01)}) {
                auto broken = data;
                set_u16(broken, 3 * l.block_bytes + offset, bad);
                set_u16(broken, 4 * l.block_bytes + offset, 0x7e00);  // a later one is not reported
                const auto found = quant::find_invalid_block(l.type, broken);
                REQUIRE(found);
                CHECK(found->block == 3);
                CHECK(found->field == name);
                CHECK(found->problem == ((bad & 0x3ff) ? "NaN" : "inf"));
            }
            // The largest finite fp16 and a subnormal are fine.
            auto edge = data;
            set_u16(edge, 1 * l.block_bytes + offset, 0x7bff);
            set_u16(edge, 2 * l.block_bytes + offset, 0x0001);
            CHECK_FALSE(quant::find_invalid_block(l.type, edge));
        }
    }
}

TEST_CASE("find_invalid_block checks Q8_K's float scale and every value of float tensors", "[check_tensors]") {
    std::vector<std::byte> q8k(292 * 3, std::byte{0});  // ggml block_q8_K: float d, qs[256], bsums[16]
    CHECK_FALSE(quant::find_invalid_block(DType::Q8_K, q8k));
    const float inf = std::numeric_limits<float>::infinity();
    std::memcpy(q8k.data() + 292 * 2, &inf, 4);
    auto found = quant::find_invalid_block(DType::Q8_K, q8k);
    REQUIRE(found);
    CHECK(found->block == 2);
    CHECK(found->problem == "inf");

    std::vector<float> f32(37, 1.5f);
    f32[21] = std::numeric_limits<float>::quiet_NaN();
    found = quant::find_invalid_block(DType::F32, std::as_bytes(std::span(f32)));
    REQUIRE(found);
    CHECK(found->block == 21);
    CHECK(found->problem == "NaN");

    std::vector<uint16_t> f16(19, 0x3c00);
    CHECK_FALSE(quant::find_invalid_block(DType::F16, std::as_bytes(std::span(f16))));
    f16[18] = 0xfc00;  // -inf in the tail
    found = quant::find_invalid_block(DType::F16, std::as_bytes(std::span(f16)));
    REQUIRE(found);
    CHECK(found->block == 18);
    CHECK(found->problem == "inf");

    std::vector<uint16_t> bf16(9, 0x3f80);
    bf16[4] = 0x7f80;  // bf16 inf; 0x7c00 (an f16 inf) is a finite bf16
    bf16[2] = 0x7c00;
    found = quant::find_invalid_block(DType::BF16, std::as_bytes(std::span(bf16)));
    REQUIRE(found);
    CHECK(found->block == 4);
    CHECK(found->problem == "inf");
    bf16[1] = 0x7fc1;
    CHECK(quant::find_invalid_block(DType::BF16, std::as_bytes(std::span(bf16)))->problem == "NaN");

    const std::vector<int32_t> ints(8, -1);  // integer types have nothing to check
    CHECK_FALSE(quant::find_invalid_block(DType::I32, std::as_bytes(std::span(ints))));
}

TEST_CASE("check-tensors flag in kiln, kiln-perplexity and kiln-bench: one line naming tensor, type and block, exit 1",
          "[check_tensors][cli]") {
    test::TempDir dir;
    const auto write = [&](const std::string& file, const Layout& l, size_t row_blocks, size_t bad_block,
                           size_t field) {
        auto data = valid_blocks(l, row_blocks * 2);
        set_u16(data, bad_block * l.block_bytes + l.scales[field].first, 0x7e00);
        GgufWriter w;
        w.set("general.architecture", GgufValue(std::string("llama")));
        const uint64_t row = static_cast<uint64_t>(type_traits(l.type).block_size) * row_blocks;
        w.add_tensor("blk.0.ffn_up.weight", l.type, {row, 2}, data);
        w.write(dir.path() / file);
        return test::shell_quote((dir.path() / file).string());
    };
    for (const Layout& l : layouts()) {
        const size_t field = l.scales.size() - 1;
        const std::string bad = write(std::string(dtype_name(l.type)) + ".gguf", l, 3, 4, field);
        const std::string expected = fmt::format("tensor 'blk.0.ffn_up.weight' ({}): block 4 has a NaN {} scale\n",
                                                 dtype_name(l.type), l.scales[field].second);
        for (const auto& [tool, args] : {std::pair{"kiln", " -p hello -n 1"}, {"kiln-perplexity", " -f /nonexistent"},
                                         {"kiln-bench", " -p 8 -n 0 -r 1"}}) {
            INFO(tool << " " << dtype_name(l.type));
            const auto run = test::run_tool(tool, "-m " + bad + args + " --check-tensors");
            CHECK(run.status == 1);
            CHECK(run.err == std::string(tool) + ": [check-tensors] " + expected);
        }
    }
}

TEST_CASE("a tensor whose rows are not whole blocks of its type is refused at load", "[check_tensors][cli]") {
    test::TempDir dir;
    for (const auto& [type, row] : {std::pair{DType::Q8_0, uint64_t(48)}, {DType::Q4_K, uint64_t(384)},
                                    {DType::IQ4_NL, uint64_t(80)}}) {
        INFO(dtype_name(type));
        // Two rows: the whole tensor is a whole number of blocks, each row is not.
        const uint64_t elements = row * 2;
        std::vector<std::byte> data(elements / type_traits(type).block_size * type_traits(type).block_bytes);
        // kiln's writer refuses such rows too: write [2 * row, 1] and patch
        // the dimensions in the tensor info to [row, 2].
        GgufWriter w;
        w.set("general.architecture", GgufValue(std::string("llama")));
        const std::string name = "blk.0.attn_q.weight";
        w.add_tensor(name, type, {elements, 1}, data);
        auto bytes = w.to_bytes();
        const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        const size_t at = view.find(name);
        REQUIRE(at != std::string_view::npos);
        const uint64_t dims[2] = {row, 2};
        std::memcpy(bytes.data() + at + name.size() + 4, dims, sizeof dims);  // after the u32 n_dims
        const auto path = dir.path() / "rows.gguf";
        test::write_file(path, bytes);
        const auto run = test::run_tool("kiln-perplexity", "-m " + test::shell_quote(path.string()) + " -f x --check-tensors");
        CHECK(run.status == 1);
        CHECK(run.err.find(fmt::format("tensor 'blk.0.attn_q.weight' has rows of {} elements, not a multiple of the "
                                       "{} block size {}", row, dtype_name(type), type_traits(type).block_size)) !=
              std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
    }
}
