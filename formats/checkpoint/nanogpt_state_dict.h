#pragma once
// A nanoGPT model.py state dict (read from a torch.save checkpoint) as a
// kiln::Checkpoint in llama.cpp's `gpt2` layout (gpt2_layout.h has the names).
//
// Where the weights are: at the top level (torch.save(model.state_dict())),
// or under "model." (nanoGPT's train.py: {"model": ..., "model_args": ...,
// "optimizer": ..., "iter_num": ..., "best_val_loss": ..., "config": ...}) or
// "state_dict.", each possibly with torch.compile's "_orig_mod." in front.
// Names start with "transformer." (wte, wpe, h.N..., ln_f) or "lm_head.".
// nn.Linear weights are (out, in), the GGUF layout already: every tensor is a
// view of the checkpoint (F32, F16 or BF16 kept). A Hugging Face
// GPT2LMHeadModel state dict saved the same way (pytorch_model.bin, same
// names) stores Conv1D (in, out) matrices instead: told by c_attn's shape
// (d, 3d), and transposed back (the buffers attn.masked_bias are ignored).
//
// Hyper-parameters: model_args.n_head is required (shapes cannot tell it);
// n_layer, n_embd, vocab_size and block_size come from model_args when there
// and are checked against the shapes, or are inferred from them; the MLP
// width is c_fc's rows (nanoGPT: 4 * n_embd); the LayerNorm epsilon is
// nanoGPT's 1e-5. model_args.bias, when present, says whether biases must be
// there (True) or must not (False). Errors: kiln::Error("pytorch", ...).
#include <string_view>

#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/torch_checkpoint.h"

namespace kiln {

// Whether the checkpoint holds a nanoGPT model (a "transformer.wte.weight" under a known prefix).
bool is_nanogpt_state_dict(const TorchCheckpoint& checkpoint);

// The result's tensors point into `checkpoint`'s data; its `source` shares `checkpoint.source`.
Checkpoint nanogpt_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name);

}  // namespace kiln
