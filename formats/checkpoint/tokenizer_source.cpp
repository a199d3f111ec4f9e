#include "formats/checkpoint/tokenizer_source.h"

#include <array>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/checkpoint/char_vocabulary.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "formats/checkpoint/llama2c.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/regular_file.h"

namespace kiln {

namespace {

constexpr const char* kComponent = "tokenizer";

void copy_gguf_vocabulary(Checkpoint& c, const std::filesystem::path& path, uint64_t vocab_rows) {
    const GgufFile source = GgufFile::open(path);
    const GgufArray* tokens = nullptr;
    if (const GgufValue* v = source.find("tokenizer.ggml.tokens")) tokens = v->as_array();
    if (source.find("tokenizer.ggml.model") == nullptr || tokens == nullptr)
        fail(kComponent, "{}: this GGUF file holds no vocabulary (no tokenizer.ggml.model and tokens)", path.string());
    if (tokens->items.size() != vocab_rows)
        fail(kComponent, "{}: the vocabulary has {} tokens but the model's embedding has {} rows", path.string(),
             tokens->items.size(), vocab_rows);
    // tokenizer.* is the vocabulary and what belongs to it (tokenizer.chat_template too).
    for (const GgufEntry& e : source.metadata())
        if (e.key.starts_with("tokenizer.")) c.metadata.push_back(e);
}

}  // namespace

bool has_tokenizer(const Checkpoint& checkpoint) {
    for (const GgufEntry& e : checkpoint.metadata)
        if (e.key == "tokenizer.ggml.model") return true;
    return false;
}

void add_tokenizer_file(Checkpoint& c, const std::filesystem::path& file, uint64_t vocab_rows) {
    if (std::filesystem::is_directory(file))
        fail(kComponent, "'{}' is a folder; --tokenizer takes one file (tokenizer.json, tokenizer.model, "
             "tokenizer.bin, meta.pkl or a GGUF)", file.string());
    const std::string head = read_file_head(file, 8);
    const size_t got = head.size();
    size_t first = 0;  // the first byte that is not JSON whitespace
    while (first < got && std::strchr(" \t\r\n", head[first]) != nullptr && head[first] != '\0') ++first;
    if (got >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0) {
        copy_gguf_vocabulary(c, file, vocab_rows);
    } else if (first < got && head[first] == '{') {
        add_hf_bpe_tokenizer(c, file, nlohmann::json::object(), vocab_rows);
    } else if (looks_like_pickle(file)) {
        add_char_tokenizer(c, read_nanogpt_meta(file), vocab_rows, file.string());
    } else if (got >= 1 && head[0] == 0x0a) {
        // A SentencePiece model is a protobuf whose first field is a piece
        // (tag 0x0a); llama2.c's tokenizer.bin starts with a small integer, so
        // one of 10 (also 0x0a) is tried as SentencePiece first, then as llama2.c.
        try {
            add_spm_tokenizer(c, file, vocab_rows);
        } catch (const Error& spm_error) {
            try {
                add_llama2c_tokenizer(c, file, vocab_rows);
            } catch (const Error&) {
                throw spm_error;
            }
        }
    } else {
        add_llama2c_tokenizer(c, file, vocab_rows);
    }
}

}  // namespace kiln
