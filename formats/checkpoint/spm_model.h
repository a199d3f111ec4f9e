#pragma once
// A SentencePiece model file (tokenizer.model: a serialized protobuf
// ModelProto), read by hand from the wire format, and embedded as a `llama`
// tokenizer the way llama.cpp's converter does.
//
// What is read (protobuf field numbers):
//   ModelProto: 1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece: 1 piece (string), 2 score (float), 3 type (enum: 1 normal,
//     2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; default 1)
//   TrainerSpec: 40 unk_id (default 0), 41 bos_id (1), 42 eos_id (2), 43 pad_id (-1)
//   NormalizerSpec: 3 add_dummy_prefix (default true)
// Every other field is skipped by its wire type. Written: tokenizer.ggml.model
// "llama", tokens, scores, token_type (SentencePiece's numbering, which GGUF
// uses too), unknown/bos/eos(/padding when >= 0)_token_id, add_bos_token
// true, add_eos_token false, add_space_prefix = add_dummy_prefix.
// Malformed or truncated data, no pieces, or a piece count different from
// the model's embedding rows: kiln::Error("tokenizer", "<file>: ... (at byte N)").
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

struct SpmModel {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<int32_t> types;
    int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
    bool add_dummy_prefix = true;
};

SpmModel parse_spm_model(std::span<const std::byte> bytes, const std::string& name);

void add_spm_tokenizer(Checkpoint& checkpoint, const std::filesystem::path& path, uint64_t vocab_rows);

}  // namespace kiln
