#pragma once
// The trained encoder-decoder as a GGUF of architecture "transformer"
// (CONTRACTS §2) with its character vocabulary (control tokens <pad>, <s>,
// </s>), written atomically. Matrices in `type` (1-D tensors stay F32).
#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/train/seq2seq_model.h"

namespace kiln::train {

struct SpecialTokens {
    int32_t bos = -1, eos = -1, pad = -1;
};

void write_seq2seq_model(const std::filesystem::path& path, const Seq2SeqModel& model,
                         const std::vector<std::string>& vocabulary, const std::vector<int32_t>& token_types,
                         SpecialTokens special, DType type = DType::F32);

}  // namespace kiln::train
