#pragma once
// GGUF files of a trained Llama: the model (the llama descriptor's keys and
// tensors plus its tokenizer) that kiln and llama.cpp run, and training
// checkpoints (the same file plus the training state of param_gguf.h). The
// tokenizer is a character vocabulary, or the tokenizer.* metadata of a GGUF
// vocabulary file (SentencePiece or BPE) copied as it is.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/train/llama_train_model.h"
#include "engine/train/param_gguf.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::train {

struct TrainedTokenizer {
    std::vector<GgufEntry> metadata;  // every tokenizer.* key, in order
    int64_t n_vocab = 0;
};

// A character vocabulary (tokenizer.ggml.model "char").
TrainedTokenizer char_tokenizer(const std::vector<std::string>& chars);
// The tokenizer.* keys of a GGUF file (e.g. a vocabulary-only GGUF); kiln::Error when it has no tokens.
TrainedTokenizer gguf_tokenizer(const GgufFile& file);

// Writes the model atomically. type: matrices are stored in it (1-D tensors stay F32).
void write_llama_model(const std::filesystem::path& path, const LlamaTrainModel& model, const TrainedTokenizer& tokenizer,
                       DType type = DType::F32, const TrainingState* training = nullptr);

struct LoadedLlama {
    arch::LlamaParams params;
    bool tied = false;
    TrainedTokenizer tokenizer;
    std::vector<float> data;  // the flat buffer of a LlamaTrainModel(params, tied)
    std::optional<TrainingState> training;
};

// Reads a file written by write_llama_model with F32 tensors (a checkpoint or an F32 model).
LoadedLlama read_llama_checkpoint(const std::filesystem::path& path, bool decay_embeddings = false);

}  // namespace kiln::train
