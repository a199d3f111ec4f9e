#pragma once
// The trained encoder-decoder as a GGUF of architecture "transformer"
// (docs/architectures.md, transformer) with its character vocabulary (control tokens <pad>, <s>,
// </s>): the model kiln runs (matrices in `type`, 1-D tensors F32), and the
// training checkpoint, the same file in F32 plus the training state of
// param_gguf.h. Files are written atomically.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/train/param_gguf.h"
#include "engine/train/seq2seq_model.h"

namespace kiln::train {

struct SpecialTokens {
    int32_t bos = -1, eos = -1, pad = -1;
};

struct Seq2SeqVocabulary {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;  // tokenizer.ggml.token_type: 1 normal, 3 control
    SpecialTokens special;
};

void write_seq2seq_model(const std::filesystem::path& path, const Seq2SeqModel& model, const Seq2SeqVocabulary& vocabulary,
                         DType type = DType::F32, const TrainingState* training = nullptr);
// The bytes write_seq2seq_model would write (for decoding the in-memory
// weights with the inference engine exactly as kiln decodes the file).
std::vector<std::byte> seq2seq_model_bytes(const Seq2SeqModel& model, const Seq2SeqVocabulary& vocabulary,
                                           DType type = DType::F32);

struct LoadedSeq2Seq {
    Seq2SeqConfig config;
    std::vector<std::string> vocabulary;
    std::vector<float> data;  // the flat buffer of a Seq2SeqModel(config)
    std::optional<TrainingState> training;
};

// Reads a file written by write_seq2seq_model with F32 tensors (a checkpoint,
// or an F32 model). kiln::Error("checkpoint") for anything missing or malformed.
LoadedSeq2Seq read_seq2seq_checkpoint(const std::filesystem::path& path);

}  // namespace kiln::train
