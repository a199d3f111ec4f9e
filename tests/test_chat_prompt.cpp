// A rendered chat prompt gets exactly one BOS, whether the template writes it,
// the vocabulary asks for it, or both.
#include <catch2/catch.hpp>

#include "formats/chat/chat_prompt.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"
#include "support/paths.h"

using namespace kiln;

TEST_CASE("a chat prompt that writes the BOS text gets one BOS", "[chat_prompt]") {
    const GgufFile file = GgufFile::open(test::shared_models_dir() / "stories260K.gguf");
    const auto tokenizer = load_tokenizer(file);
    REQUIRE(tokenizer->add_bos());
    const int32_t bos = tokenizer->bos();
    const std::vector<int32_t> plain = chat_prompt_tokens(*tokenizer, "Once upon a time");
    const std::vector<int32_t> with_bos_text = chat_prompt_tokens(*tokenizer, "<s>Once upon a time");
    REQUIRE(plain.size() >= 2);
    CHECK(plain[0] == bos);
    CHECK(plain[1] != bos);
    CHECK(with_bos_text[0] == bos);
    CHECK(with_bos_text[1] != bos);
    // The same text after the BOS, however the BOS came (SPM's space prefix aside, which follows the BOS either way).
    CHECK(std::count(with_bos_text.begin(), with_bos_text.end(), bos) == 1);
    // No EOS at the end: the reply follows.
    CHECK(plain.back() != tokenizer->eos());
}
