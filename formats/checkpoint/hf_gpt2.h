#pragma once
// A Hugging Face GPT2LMHeadModel folder as a kiln::Checkpoint in llama.cpp's
// `gpt2` layout (gpt2_layout.h has the tensor names).
//
// Tensor names: "transformer.h.N.attn.c_attn.weight" ... as GPT2LMHeadModel
// saves them, or without "transformer." as a bare GPT2Model (the original
// "gpt2" upload) does. The Conv1D weights (c_attn, c_proj, c_fc, mlp.c_proj)
// are stored (in, out) and are transposed to nn.Linear's (out, in).
// lm_head.weight, when present and different from wte (tie_word_embeddings
// false), becomes output.weight; otherwise the head is tied. The buffers
// attn.bias and attn.masked_bias are ignored.
//
// config.json: n_embd, n_layer, n_head, n_positions (or n_ctx), vocab_size
// required; n_inner (null: 4 * n_embd), layer_norm_epsilon (default 1e-5).
// activation_function must be the tanh GELU ("gelu_new", "gelu_pytorch_tanh",
// "gelu_fast"), and scale_attn_by_inverse_layer_idx false (kiln scales by
// 1/sqrt(head_dim) only). Errors: kiln::Error("hf", ...).
#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "formats/checkpoint/checkpoint.h"

namespace kiln {

Checkpoint hf_gpt2_checkpoint(const std::filesystem::path& folder, const nlohmann::json& config);

}  // namespace kiln
