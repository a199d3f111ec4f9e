#pragma once
// Reading Andrej Karpathy's llama2.c checkpoints (and its tokenizer.bin) into a
// kiln::Checkpoint laid out the way llama.cpp's `llama` architecture expects.
//
// Three model layouts exist, all little-endian:
//   legacy ("version 0", what run.c reads): 7 int32 (dim, hidden_dim, n_layers,
//     n_heads, n_kv_heads, vocab_size, seq_len), a negative vocab_size meaning
//     the classifier is stored separately; then float32 arrays, each stacked
//     over layers: embedding, attention norms, wq, wk, wv, wo, ffn norms, w1,
//     w2, w3, final norm, two unused RoPE tables, and the classifier if unshared.
//   "ak42" version 1: magic 0x616b3432, version, the 7 int32, a shared-classifier
//     byte, zero padding to 256 bytes; then float32: norms first (attention,
//     ffn, final), embedding, wq, wk, wv, wo, w1, w2, w3, classifier if unshared.
//   "ak42" version 2: as version 1 plus an int32 group size after the flag byte;
//     the norms stay float32, every matrix is int8 with one float32 scale per
//     group, each layer's int8 block immediately followed by its scales (what
//     runq.c maps). kiln dequantizes these to F32 (value = q * scale).
// The tokenizer file has no token count (the model's vocab_size is it):
//   uint32 max_token_length, then per token: float32 score, int32 byte length,
//   the bytes. Pieces are stored with ' ' where SentencePiece has U+2581 and
//   BOS/EOS as "\n<s>\n" / "\n</s>\n"; the reader restores SentencePiece's
//   spelling so the vocabulary equals what llama.cpp's converter writes.
//
// No permutation of Q/K is needed: llama2.c rotates adjacent pairs, exactly
// like llama.cpp's `llama` RoPE.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

inline constexpr uint32_t kLlama2cMagic = 0x616b3432;  // "ak42" read as a little-endian u32
inline constexpr size_t kLlama2cHeaderBytes = 256;     // versioned header, padded

// Content-based detection, for choosing a reader without trusting extensions.
// `head` is the start of the file (32 bytes are enough; fewer is fine for tiny
// files) and `file_size` its total size. True for the "ak42" magic, or for a
// legacy header whose values are plausible and whose implied size equals
// `file_size` exactly (shared or unshared classifier). False otherwise, e.g.
// for GGUF, zip or random files.
bool looks_like_llama2c(std::span<const std::byte> head, uint64_t file_size);

// Reads a llama2.c model (any of the three layouts) and, when `tokenizer` is
// not null, its tokenizer.bin. F32 tensors point into the file mapping (kept
// alive by Checkpoint::source); dequantized ones live in Checkpoint::owned.
// Every count and size is checked against overflow and the file size first:
// a truncated or corrupt file throws kiln::Error("llama2c", "<file>: ...").
Checkpoint read_llama2c(const std::filesystem::path& model, const std::filesystem::path* tokenizer);

// Appends the tokenizer.ggml.* entries of llama2.c's tokenizer.bin (a
// SentencePiece vocabulary: model "llama", tokens, scores, types, unk 0, bos 1,
// eos 2); kiln::Error when it does not hold exactly `vocab` tokens.
void add_llama2c_tokenizer(Checkpoint& checkpoint, const std::filesystem::path& tokenizer, uint64_t vocab);

}  // namespace kiln
