// --prompt-cache: a slot's KV cache saved and put back gives the logits of the
// same evaluation done in one session; the file is validated and a file that
// does not fit is ignored with a note, never trusted.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "engine/core/error.h"
#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

std::string stories() { return shell_quote((test::shared_models_dir() / "stories260K.gguf").string()); }

}  // namespace

TEST_CASE("a slot's saved cache rows, put back, continue exactly as the session that made them", "[prompt_cache]") {
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
    const auto model = load_causal_lm(file);
    ThreadPool pool(2);
    const std::vector<int32_t> prompt{1, 403, 407, 261, 378, 87, 12, 300, 44, 9, 71};
    const std::span<const int32_t> all(prompt);
    // Logits are compared with those of the same graph shapes, which give the
    // same bits: a batch of another size may sum in another order.
    for (const CacheTypes types : {CacheTypes{DType::F32}, CacheTypes{DType::F16, DType::BF16}}) {
        INFO(dtype_name(types.k) << "/" << dtype_name(types.v));
        const std::vector<int32_t> first_slots(8, 1), rest_slots(3, 1);
        // The reference: slot 1 of 2 gets the first 8 tokens, then the rest.
        auto one = model->new_session(32, 2, Executor::Mode::Fast, types);
        one->eval_slots(all.first(8), first_slots, pool);
        const std::vector<std::byte> rows = one->save_slot(1);
        const auto expected = copy(one->eval_slots(all.subspan(8), rest_slots, pool));
        CHECK(rows.size() == static_cast<size_t>(one->cache_shape().n_layers) * 8 * one->cache_shape().row_bytes);

        // Another session gets the 8 saved tokens back in slot 1.
        auto two = model->new_session(32, 2, Executor::Mode::Fast, types);
        two->restore_slot(1, rows, 8, 8);
        CHECK(two->n_past(1) == 8);
        CHECK(two->n_past(0) == 0);
        CHECK(copy(two->eval_slots(all.subspan(8), rest_slots, pool)) == expected);

        // Keeping 5 of the 8 saved tokens is the session that evaluated 8 and kept 5.
        auto three = model->new_session(32, 1, Executor::Mode::Fast, types);
        three->restore_slot(0, rows, 8, 5);
        const auto from_five = copy(three->eval(all.subspan(5), pool));
        auto four = model->new_session(32, 1, Executor::Mode::Fast, types);
        four->eval(all.first(8), pool);
        four->truncate(0, 5);
        CHECK(from_five == copy(four->eval(all.subspan(5), pool)));
        // Rows that do not fit are refused.
        CHECK_THROWS_AS(three->restore_slot(0, rows, 7, 5), kiln::Error);
        CHECK_THROWS_AS(three->restore_slot(0, rows, 8, 9), kiln::Error);
    }
}

TEST_CASE("kiln --prompt-cache reuses a prompt's cache, and ignores a file that does not fit", "[prompt_cache][cli]") {
    test::TempDir dir;
    const std::string cache = shell_quote((dir.path() / "prompt.cache").string());
    const std::string prompt = "'Once upon a time there was a little girl named Lily. She loved to play'";
    const std::string base = "-m " + stories() + " -n 12 --temp 0 -t 1 -p " + prompt;
    const auto plain = test::run_tool("kiln", base);
    REQUIRE(plain.status == 0);

    const auto first = test::run_tool("kiln", base + " --prompt-cache " + cache);
    INFO(first.err);
    REQUIRE(first.status == 0);
    CHECK(first.out == plain.out);
    CHECK(first.err.find(": 0 of ") != std::string::npos);
    REQUIRE(std::filesystem::exists(dir.path() / "prompt.cache"));

    // The same prompt again: all but its last token come from the file.
    const auto again = test::run_tool("kiln", base + " --prompt-cache " + cache);
    CHECK(again.out == plain.out);
    CHECK(again.err.find("prompt tokens reused") != std::string::npos);
    CHECK(again.err.find(": 0 of ") == std::string::npos);

    // A longer prompt that starts the same: the shared tokens are reused, the text is the uncached run's.
    const std::string longer = "'Once upon a time there was a little girl named Lily. She loved to play with her dog'";
    const auto extended = test::run_tool("kiln", "-m " + stories() + " -n 12 --temp 0 -t 1 -p " + longer +
                                                     " --prompt-cache " + cache + " --prompt-cache-ro");
    const auto extended_plain = test::run_tool("kiln", "-m " + stories() + " -n 12 --temp 0 -t 1 -p " + longer);
    CHECK(extended.out == extended_plain.out);

    // Another cache type, a damaged file, another model: each ignored with a note, the text unchanged.
    const auto other_types = test::run_tool("kiln", base + " --prompt-cache " + cache + " --prompt-cache-ro -ctk f32");
    CHECK(other_types.err.find("ignoring the prompt cache") != std::string::npos);
    CHECK(other_types.err.find("made with other cache types") != std::string::npos);
    CHECK(other_types.out == test::run_tool("kiln", base + " -ctk f32").out);

    test::Bytes bytes = test::read_file(dir.path() / "prompt.cache");
    bytes[bytes.size() / 2] ^= std::byte{0x40};
    test::write_file(dir.path() / "prompt.cache", bytes);
    const auto damaged = test::run_tool("kiln", base + " --prompt-cache " + cache + " --prompt-cache-ro");
    CHECK(damaged.status == 0);
    CHECK(damaged.err.find("damaged") != std::string::npos);
    CHECK(damaged.out == plain.out);

    const auto other_model = test::run_tool(
        "kiln", "-m " + shell_quote((test::fixtures_dir() / "kv_cache" / "llama_hd32.gguf").string()) +
                    " -n 4 --temp 0 -p Once --prompt-cache " + cache);
    CHECK(other_model.status == 0);
    CHECK(other_model.err.find("ignoring the prompt cache") != std::string::npos);

    const auto no_file = test::run_tool("kiln", base + " --prompt-cache-ro");
    CHECK(no_file.status == 2);
    CHECK(no_file.err.find("--prompt-cache-ro needs --prompt-cache FILE") != std::string::npos);
}
