#pragma once
// An encoder-decoder model built on torch.nn.Transformer (a torch.save
// checkpoint) as a kiln::Checkpoint in the `transformer` GGUF layout
// (docs/architectures.md, transformer). The model is expected to look like this:
//
//   class Seq2Seq(nn.Module):
//       src_embed = nn.Embedding(V, d)      # or src_tok_emb.embedding (PyTorch's translation tutorial)
//       tgt_embed = nn.Embedding(V, d)      # or tgt_tok_emb.embedding; may be src_embed itself
//       transformer = nn.Transformer(d, nhead, ..., batch_first=True)
//       generator = nn.Linear(d, V)         # its weight may be tgt_embed's (tied)
//   forward: embed(x) * sqrt(d) + sinusoidal PE, dropout off at inference.
//
//   torch name (under the state dict prefix)              GGUF name
//   src_embed.weight (V, d)                               token_embd.weight [d, V]
//   tgt_embed.weight (V, d)                               dec.token_embd.weight (left out when it is src_embed's)
//   generator.weight (V, d) / generator.bias (V)          output.weight (left out when tied to the target embedding) / output.bias
//   transformer.encoder.layers.N.self_attn.in_proj_weight (3d, d)  enc.blk.N.attn_{q,k,v}.weight: rows [0,d), [d,2d), [2d,3d)
//   ...self_attn.in_proj_bias (3d)                        enc.blk.N.attn_{q,k,v}.bias
//   ...self_attn.out_proj.weight/.bias                    enc.blk.N.attn_o.weight/.bias
//   ...linear1 / linear2 / norm1 / norm2                  enc.blk.N.ffn_up / ffn_down / attn_norm / ffn_norm
//   transformer.encoder.norm                              enc.output_norm
//   transformer.decoder.layers.N.self_attn.*              dec.blk.N.attn_{q,k,v,o}
//   ...multihead_attn.*                                   dec.blk.N.cross_attn_{q,k,v,o}
//   ...linear1 / linear2 / norm1 / norm2 / norm3          dec.blk.N.ffn_up / ffn_down / attn_norm / cross_attn_norm / ffn_norm
//   transformer.decoder.norm                              dec.output_norm
// Every tensor is a view (Q/K/V are row ranges of in_proj_*): no copies.
// Biases and the final norms may be absent. Positional-encoding buffers
// (pe, pos_encoder.pe, positional_encoding.pe, positional_encoding.pos_embedding)
// are ignored: the PE is recomputed. Any other name is an error.
//
// The prefix: the top level, "model." or "state_dict.", each optionally with
// "_orig_mod.". Hyper-parameters from "model_args": nhead (required: shapes
// cannot tell it), d_model, num_encoder_layers, num_decoder_layers,
// dim_feedforward (checked against the shapes, or inferred from them),
// norm_first (default False, torch's default), activation ("relu" default, or
// "gelu"), layer_norm_eps (default 1e-5), max_len (the context length;
// default 5000, the tutorials' PositionalEncoding default).
//
// general.name: a string "name" in the checkpoint (beside "model"), as
// kiln-convert's export (convert/export_torch.h) writes it; else `name`.
//
// Vocabulary: an "itos" list of strings in the checkpoint (beside "model")
// becomes a char vocabulary (char_vocabulary.h); "specials" {"bos": "<s>",
// "eos": "</s>", "pad": "<pad>", "unk": ...} (token strings or ids) names the
// control tokens and the bos/eos/padding/unknown ids. Source and target share
// one vocabulary: embedding tables of different sizes are an error.
// Errors: kiln::Error("pytorch", ...) naming the tensor and both shapes.
#include <string_view>

#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/torch_checkpoint.h"

namespace kiln {

bool is_transformer_state_dict(const TorchCheckpoint& checkpoint);

Checkpoint transformer_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name);

}  // namespace kiln
