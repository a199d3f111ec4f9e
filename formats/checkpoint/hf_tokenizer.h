#pragma once
// A Hugging Face fast-tokenizer file (tokenizer.json) with a byte-level BPE
// model, embedded the way llama.cpp does:
//   tokenizer.ggml.model "gpt2", tokenizer.ggml.pre: the llama.cpp type that
//     splits as the file's pre_tokenizer does ("gpt-2" for ByteLevel,
//     "llama-bpe" and "qwen2" for Llama 3's and Qwen2's Split regexes,
//     "smollm" for single Digits before ByteLevel; any other is refused),
//   tokenizer.ggml.tokens (by id: model.vocab, then added_tokens),
//   tokenizer.ggml.token_type (1 normal, 3 control = a special added token,
//   4 user-defined = a non-special added token, 5 unused = a padding row),
//   tokenizer.ggml.merges ("left right" strings, in rank order; the file may
//   hold them as strings or as [left, right] pairs),
//   tokenizer.ggml.bos_token_id / eos_token_id from config.json's
//   bos_token_id / eos_token_id when set, tokenizer.ggml.add_bos_token false.
// Ids must be unique; ids the file does not name, up to the model's
// embedding rows (vocabularies padded to a round size), become unused
// "<unused_N>" tokens. More tokens than rows, a model type other than BPE, or
// a pre-tokenizer kiln cannot map: kiln::Error("tokenizer", ...).
#include <cstdint>
#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

void add_hf_bpe_tokenizer(Checkpoint& checkpoint, const std::filesystem::path& tokenizer_json,
                          const nlohmann::json& config, uint64_t vocab_rows);

// What a folder's tokenizer_config.json adds to the vocabulary already in the
// checkpoint, as llama.cpp's converter takes it: chat_template (a string, or a
// list of named templates: "default" as tokenizer.chat_template, the others as
// tokenizer.chat_template.<name>), the bos/eos/unk/pad tokens (a string or
// {"content": ...}) as ids, add_bos_token / add_eos_token. Entries replace
// what the vocabulary file said. A token the vocabulary lacks is an error.
void add_hf_tokenizer_config(Checkpoint& checkpoint, const std::filesystem::path& tokenizer_config_json);

}  // namespace kiln
