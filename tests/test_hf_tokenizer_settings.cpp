// tokenizer.json settings of the wrong JSON type (a number where true/false
// belongs) are refused with one kiln::Error line, as every other malformed
// value is; they used to escape as nlohmann's own exception (found by
// tests/fuzz/fuzz_hf_tokenizer.cpp; the inputs are its regressions).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "engine/core/error.h"
#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "support/error_check.h"
#include "support/paths.h"

#include <nlohmann/json.hpp>

using namespace kiln;

namespace {

std::string error_for(const std::filesystem::path& regression) {
    Checkpoint checkpoint;
    return test::error_of([&] { add_hf_bpe_tokenizer(checkpoint, regression, nlohmann::json::object(), 16); });
}

const std::filesystem::path kRegressions = test::source_dir() / "tests/fuzz/regressions";

}  // namespace

TEST_CASE("tokenizer.json: a pre-tokenizer flag that is not true or false is a kiln error", "[tokenizer][hostile]") {
    CHECK_THAT(error_for(kRegressions / "hf_tokenizer-prefix-space-not-bool.bin"),
               Catch::Contains("the ByteLevel pre-tokenizer's add_prefix_space is not true or false"));
    CHECK_THAT(error_for(kRegressions / "hf_tokenizer-digits-flag-not-bool.bin"),
               Catch::Contains("the Digits pre-tokenizer's individual_digits is not true or false"));
}

TEST_CASE("tokenizer.json: an added token whose special is not a boolean is not special", "[tokenizer][hostile]") {
    Checkpoint checkpoint;
    add_hf_bpe_tokenizer(checkpoint, kRegressions / "hf_tokenizer-special-not-bool.bin", nlohmann::json::object(), 2);
    const GgufArray* types = nullptr;
    for (const GgufEntry& e : checkpoint.metadata)
        if (e.key == "tokenizer.ggml.token_type") types = e.value.as_array();
    REQUIRE(types != nullptr);
    REQUIRE(types->items.size() == 2);
    CHECK(types->items[1].as_int() == 4);  // user-defined, not control (3)
}
