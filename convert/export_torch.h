#pragma once
// kiln-convert --to safetensors for the encoder-decoder `transformer`
// architecture, which has no Hugging Face class: the folder gets the model as
// PyTorch users hold it, a torch.save checkpoint of a torch.nn.Transformer
// seq2seq model, exactly the layout kiln-convert reads back
// (formats/checkpoint/transformer_state_dict.h):
//
//   FOLDER/model.pt     {"model": OrderedDict(state dict),
//                        "model_args": {vocab_size, d_model, nhead, num_encoder_layers,
//                                       num_decoder_layers, dim_feedforward, max_len,
//                                       norm_first, activation[, layer_norm_eps]},
//                        "itos": [token strings by id], "specials": {"bos": "<s>", ...},
//                        "name": general.name}
//   FOLDER/config.json  the architecture and the same hyper-parameters, for people and scripts
//
// The state dict uses torch.nn.Transformer's names (src_embed, tgt_embed,
// transformer.encoder/decoder.layers.N..., generator); each attention's Q, K
// and V (and their biases) are fused back into in_proj_weight (3d, d) and
// in_proj_bias (3d). A model without dec.token_embd.weight gets tgt_embed =
// src_embed, and one without output.weight gets generator.weight = tgt_embed,
// as one shared storage, which is what nn.Module.state_dict() saves for tied
// modules and what kiln's reader takes as tied.
//
// Types: F32/F16/BF16 tensors keep their bytes (float32/float16/bfloat16
// tensors); a quantized tensor is written as float32 (dequantized), as the
// Hugging Face export does, and the log says how many. layer_norm_eps is left
// out when it is torch's default 1e-5: torch < 2.0's
// torch.load(weights_only=True) cannot read a float, so the file loads there
// unless the model has another epsilon (then the log says so).
//
// Vocabulary: a char vocabulary (tokenizer.ggml.model "char") becomes "itos"
// and "specials" (bos, eos, pad, unk); its control tokens must be exactly
// those. A SentencePiece or byte-level BPE vocabulary goes beside model.pt as
// the Hugging Face export writes it (tokenizer.model or tokenizer.json, and
// tokenizer_config.json; formats/checkpoint/hf_tokenizer_writer.h): kiln-convert
// takes it back with --tokenizer. Metadata the checkpoint has no place for is
// left out, named on the log.
// Refused by name, kiln::Error("convert", ...): tensors outside the layout or
// of the wrong shape, Q/K/V of different types, biases on some of Q/K/V only.
#include <cstdio>
#include <filesystem>

#include "formats/checkpoint/checkpoint.h"

namespace kiln::convert {

// Writes `folder` (missing or empty; its parent must exist) atomically: on any
// error no folder and no file is left behind.
void export_torch_folder(const Checkpoint& checkpoint, const std::filesystem::path& folder, std::FILE* log);

}  // namespace kiln::convert
