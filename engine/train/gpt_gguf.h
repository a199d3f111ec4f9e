#pragma once
// GGUF files of a trained GPT: the plain model (gpt2 layout of docs/architectures.md, gpt2,
// with the character vocabulary as tokenizer.ggml.model = "char") that kiln
// runs, and training checkpoints: the same file plus the training state of
// param_gguf.h. Both are written atomically.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/train/gpt_model.h"
#include "engine/train/param_gguf.h"

namespace kiln::train {

// Writes the model. type: matrices are stored in it (norms and other 1-D
// tensors stay F32; rows that are not whole blocks fall back to F16).
void write_gpt_model(const std::filesystem::path& path, const GptModel& model, const std::vector<std::string>& vocabulary,
                     DType type = DType::F32, const TrainingState* training = nullptr);

struct LoadedGpt {
    GptConfig config;
    std::vector<std::string> vocabulary;
    std::vector<float> data;  // the flat buffer of a GptModel(config)
    std::optional<TrainingState> training;
};

// Reads a file written by write_gpt_model with F32 tensors (a checkpoint, or
// an F32 model). kiln::Error for anything missing or malformed.
LoadedGpt read_gpt_checkpoint(const std::filesystem::path& path, bool decay_embeddings = false);

}  // namespace kiln::train
