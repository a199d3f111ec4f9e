#pragma once
// A llama2.c model.py state dict (read from a torch.save checkpoint) as a
// kiln::Checkpoint in llama.cpp's `llama` layout.
//
// Where the weights are: at the top level (torch.save(model.state_dict())) or
// under "model." (llama2.c's train.py: {"model": ..., "model_args": ...,
// "optimizer": ..., "iter_num": ...}) or "state_dict.", each possibly with
// torch.compile's "_orig_mod." in front of the parameter names. Everything
// outside that prefix (optimizer state, config) is ignored; an unknown tensor
// inside it is an error, since dropping weights would make a different model.
//
//   model.py name                          llama.cpp name              ggml dims
//   tok_embeddings.weight  (vocab, dim)    token_embd.weight           [dim, vocab]
//   norm.weight            (dim)           output_norm.weight          [dim]
//   output.weight          (vocab, dim)    output.weight               [dim, vocab]
//   layers.N.attention.wq.weight           blk.N.attn_q.weight         [dim, n_heads*hd]
//   layers.N.attention.wk/wv.weight        blk.N.attn_k/attn_v.weight  [dim, n_kv_heads*hd]
//   layers.N.attention.wo.weight           blk.N.attn_output.weight    [n_heads*hd, dim]
//   layers.N.attention_norm.weight         blk.N.attn_norm.weight      [dim]
//   layers.N.feed_forward.w1.weight        blk.N.ffn_gate.weight       [dim, hidden]
//   layers.N.feed_forward.w2.weight        blk.N.ffn_down.weight       [hidden, dim]
//   layers.N.feed_forward.w3.weight        blk.N.ffn_up.weight         [dim, hidden]
// A torch (out, in) matrix is ggml [in, out] with the very same bytes, so every
// tensor is a view of the checkpoint (dtype kept: F32, F16 or BF16). Q and K
// are not permuted: llama2.c's RoPE rotates adjacent pairs, as llama.cpp's
// `llama` RoPE does. output.weight is left out when it shares tok_embeddings'
// storage (model.py ties them), and llama.cpp then uses token_embd.weight.
//
// Hyper-parameters come from "model_args.*" (dim, n_layers, n_heads,
// n_kv_heads, vocab_size, hidden_dim, multiple_of, norm_eps, max_seq_len) when
// present; missing ones are inferred from tensor shapes, except n_heads, which
// shapes cannot tell (an error names it), and max_seq_len / norm_eps, which
// default to model.py's ModelArgs defaults (2048, 1e-5). Without hidden_dim,
// model.py's rule derives it from dim and multiple_of. Every tensor's shape is
// then checked against them: a mismatch or a missing tensor throws
// kiln::Error("pytorch", ...) naming the tensor and both shapes.
//
// Metadata, as llama.cpp writes it: general.architecture "llama",
// general.name, llama.context_length, llama.embedding_length,
// llama.feed_forward_length, llama.attention.head_count,
// llama.attention.head_count_kv, llama.block_count, llama.rope.dimension_count
// (all UINT32) and llama.attention.layer_norm_rms_epsilon (FLOAT32). No
// tokenizer: llama2.c keeps it in a separate tokenizer.bin.
#include <string_view>

#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/torch_checkpoint.h"

namespace kiln {

// The result's tensors point into `checkpoint`'s data; its `source` shares
// `checkpoint.source`, so it stays valid after `checkpoint` is gone.
Checkpoint llama_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name);

}  // namespace kiln
