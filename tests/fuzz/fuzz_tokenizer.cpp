// libFuzzer entry for prompt text, the untrusted bytes a server receives: the
// first byte picks a pre-tokenizer (every tokenizer.ggml.pre kiln knows) or one
// of the two shared vocabularies (SentencePiece, GPT-2 BPE); the rest is text.
// A pre-tokenizer's pieces must join to the text as read (llama_code_points);
// a tokenizer's ids must be in its vocabulary and decode without throwing.
// Anything else (a crash, a sanitizer report, an exception, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/bpe_pretokenizer.h"
#include "formats/tokenizer/tokenizer.h"
#include "formats/tokenizer/utf8.h"

namespace {

const std::vector<kiln::BpePretokenizer>& pretokenizers() {
    static const std::vector<kiln::BpePretokenizer> all = [] {
        std::vector<kiln::BpePretokenizer> out;
        for (std::string_view name : kiln::BpePretokenizer::known_names()) out.emplace_back(name, "fuzz");
        return out;
    }();
    return all;
}

const std::vector<std::unique_ptr<kiln::Tokenizer>>& tokenizers() {
    static const std::vector<std::unique_ptr<kiln::Tokenizer>> all = [] {
        std::vector<std::unique_ptr<kiln::Tokenizer>> out;
        for (const char* file : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"})
            out.push_back(kiln::load_tokenizer(kiln::GgufFile::open(std::string(KILN_SHARED_DIR) + "/models/vocab/" + file)));
        return out;
    }();
    return all;
}

std::string utf8_of(const std::u32string& code_points) {
    std::string out;
    for (char32_t cp : code_points) kiln::utf8_append(out, cp);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t choice = data[0] % (pretokenizers().size() + 2 * tokenizers().size());
    if (choice < pretokenizers().size()) {
        std::string joined;
        for (const std::string& piece : pretokenizers()[choice].split(text)) joined += piece;
        if (joined != utf8_of(kiln::llama_code_points(text))) std::abort();
        return 0;
    }
    const size_t t = choice - pretokenizers().size();
    const kiln::Tokenizer& tokenizer = *tokenizers()[t / 2];
    kiln::EncodeOptions options = tokenizer.prompt_options(/*parse_special=*/t % 2 == 0);
    const std::vector<int32_t> ids = tokenizer.encode(text, options);
    for (int32_t id : ids)
        if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab_size()) std::abort();
    (void)tokenizer.decode(ids);
    return 0;
}
