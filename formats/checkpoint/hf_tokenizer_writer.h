#pragma once
// A GGUF vocabulary (tokenizer.* metadata) as Hugging Face tokenizer files,
// the inverse of spm_model.h and hf_tokenizer.h, for kiln-convert --to
// safetensors. What kiln's readers take back gives the same tokenizer.* keys.
//
//   tokenizer.ggml.model "llama" (SentencePiece) -> tokenizer.model
//     (spm_model_writer.h: pieces = tokens, scores, token_type; unk/bos/eos/pad
//     ids, llama.cpp's defaults 0/1/2/none where a key is absent, an id past
//     the vocabulary (4294967295) = none; add_dummy_prefix =
//     add_space_prefix (default true); remove_extra_whitespaces)
//   tokenizer.ggml.model "gpt2" (byte-level BPE) -> tokenizer.json: model BPE
//     (vocab: the normal tokens; merges "a b"; ignore_merges for llama-bpe),
//     added_tokens: control tokens (type 3) special, user-defined (4) not;
//     unused "<unused_N>" rows (type 5) are left out (the reader pads them
//     back); pre_tokenizer the inverse of hf_tokenizer.cpp's pre_type() for
//     tokenizer.ggml.pre gpt-2, llama-bpe, qwen2, smollm (any other value, or
//     none, is refused by name); ByteLevel decoder; post_processor ByteLevel,
//     with Llama 3's TemplateProcessing when BOS/EOS are added
//   both -> tokenizer_config.json: add_bos_token / add_eos_token (the file's,
//     else llama.cpp's default), bos/eos/unk/pad token texts,
//     chat_template (a string, or named templates as a list when
//     tokenizer.chat_template.<name> keys exist), tokenizer_class
//   "char" and other models: no files; a note says so.
// special_ids holds bos_token_id / eos_token_id / pad_token_id for
// config.json and generation_config.json.
// Refusals: kiln::Error("tokenizer", ...).
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf/gguf_file.h"

namespace kiln {

struct HfTokenizerFiles {
    bool has_vocabulary = false;  // tokenizer.ggml.model is set
    std::string model;            // tokenizer.ggml.model
    std::vector<std::pair<std::string, std::string>> files;  // file name in the folder, its bytes
    nlohmann::ordered_json special_ids = nlohmann::ordered_json::object();
    std::vector<std::string> notes;  // for the log: what was not written, or will not come back
};

// `architecture` picks tokenizer_config.json's tokenizer_class.
HfTokenizerFiles hf_tokenizer_files(const std::vector<GgufEntry>& metadata, std::string_view architecture);

}  // namespace kiln
