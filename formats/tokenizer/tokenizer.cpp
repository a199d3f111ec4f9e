#include "formats/tokenizer/tokenizer.h"

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/char_tokenizer.h"
#include "formats/tokenizer/gpt2_tokenizer.h"
#include "formats/tokenizer/spm_tokenizer.h"
#include "formats/tokenizer/vocab_metadata.h"

namespace kiln {

std::unique_ptr<Tokenizer> load_tokenizer(const GgufFile& file) {
    const std::string model = vocab::model_name(file);
    if (model == "llama") return std::make_unique<SpmTokenizer>(file);
    if (model == "gpt2") return std::make_unique<Gpt2Tokenizer>(file);
    if (model == "char") return std::make_unique<CharTokenizer>(file);
    // llama.cpp's other vocabulary types, which kiln does not implement.
    constexpr std::string_view known = "kiln reads 'llama' SentencePiece BPE, 'gpt2' byte-level BPE, 'char' characters";
    if (model == "bert")
        fail(vocab::kComponent, "{}: tokenizer.ggml.model is 'bert' (WordPiece, llama.cpp's WPM), which kiln does not "
             "implement ({})", file.name(), known);
    if (model == "t5")
        fail(vocab::kComponent, "{}: tokenizer.ggml.model is 't5' (Unigram, llama.cpp's UGM), which kiln does not "
             "implement ({})", file.name(), known);
    if (model == "rwkv")
        fail(vocab::kComponent, "{}: tokenizer.ggml.model is 'rwkv' (RWKV's trie tokenizer), which kiln does not "
             "implement ({})", file.name(), known);
    if (model == "no_vocab" || model == "none")
        fail(vocab::kComponent, "{}: tokenizer.ggml.model is '{}': the file has no vocabulary to tokenize with ({})",
             file.name(), model, known);
    fail(vocab::kComponent, "{}: tokenizer.ggml.model is '{}', which kiln does not know (known: 'llama' "
         "SentencePiece BPE, 'gpt2' byte-level BPE, 'char' characters)", file.name(), printable(model));
}

}  // namespace kiln
