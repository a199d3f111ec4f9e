#pragma once
// What kiln-convert does with a PyTorch checkpoint once it is read: find the
// model its tensor names describe and convert it (convert/convert.cpp's
// read_torch), so the fuzz targets reach the state-dict readers too.
#include "formats/checkpoint/llama_state_dict.h"
#include "formats/checkpoint/nanogpt_state_dict.h"
#include "formats/checkpoint/torch_checkpoint.h"
#include "formats/checkpoint/transformer_state_dict.h"

namespace kiln::fuzz {

inline void convert_torch_models(const TorchCheckpoint& torch) {
    if (find_state_dict_prefix(torch, "tok_embeddings.weight")) (void)llama_checkpoint_from_state_dict(torch, "fuzz");
    else if (is_nanogpt_state_dict(torch)) (void)nanogpt_checkpoint_from_state_dict(torch, "fuzz");
    else if (is_transformer_state_dict(torch)) (void)transformer_checkpoint_from_state_dict(torch, "fuzz");
}

}  // namespace kiln::fuzz
