#pragma once
// kiln-convert's --tokenizer: one file holding a vocabulary, told apart by its
// content (never its name), added to any checkpoint as tokenizer.ggml.* keys:
//   a GGUF file        its tokenizer.* keys, copied (a vocabulary-only GGUF, or a model)
//   tokenizer.json     a Hugging Face byte-level BPE vocabulary (hf_tokenizer.h)
//   meta.pkl           nanoGPT's character vocabulary (char_vocabulary.h)
//   tokenizer.model    a SentencePiece model (spm_model.h)
//   tokenizer.bin      llama2.c's export of a SentencePiece vocabulary (llama2c.h)
// The vocabulary must have exactly as many tokens as the model's embedding rows.
#include <cstdint>
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

// Appends the vocabulary of `file` to `checkpoint`, whose token embedding has
// `vocab_rows` rows; kiln::Error("tokenizer", ...) naming the file when its
// kind is unknown, it is malformed, or its size does not fit.
void add_tokenizer_file(Checkpoint& checkpoint, const std::filesystem::path& file, uint64_t vocab_rows);

// Whether the checkpoint's metadata holds a vocabulary (tokenizer.ggml.model).
bool has_tokenizer(const Checkpoint& checkpoint);

}  // namespace kiln
