#pragma once
// The GPT-2 family (nanoGPT's model.py, Hugging Face's GPT2LMHeadModel) in
// llama.cpp's `gpt2` GGUF layout (docs/architectures.md, gpt2). The two readers
// (nanogpt_state_dict.h, hf_gpt2.h) find the tensors and hyper-parameters;
// this file checks every shape and builds the Checkpoint.
//
//   source name (after "transformer.")        llama.cpp name               ggml dims
//   wte.weight            (vocab, d)          token_embd.weight            [d, vocab]
//   wpe.weight            (n_ctx, d)          position_embd.weight         [d, n_ctx]
//   h.N.ln_1.weight/.bias (d)                 blk.N.attn_norm.weight/.bias [d]
//   h.N.attn.c_attn.weight (3d, d)            blk.N.attn_qkv.weight        [d, 3d]  (rows Q, K, V)
//   h.N.attn.c_attn.bias   (3d)               blk.N.attn_qkv.bias          [3d]
//   h.N.attn.c_proj.weight (d, d) /.bias      blk.N.attn_output.weight/.bias
//   h.N.ln_2.weight/.bias                     blk.N.ffn_norm.weight/.bias
//   h.N.mlp.c_fc.weight    (f, d) /.bias (f)  blk.N.ffn_up.weight [d, f] /.bias [f]
//   h.N.mlp.c_proj.weight  (d, f) /.bias (d)  blk.N.ffn_down.weight [f, d] /.bias [d]
//   ln_f.weight/.bias                         output_norm.weight/.bias
//   lm_head.weight         (vocab, d)         output.weight                [d, vocab]
// Shapes are nn.Linear's (out, in). Hugging Face's Conv1D stores (in, out):
// with `conv1d` set, those four matrices are expected transposed and are
// transposed back (into Checkpoint::owned); everything else is a view.
//
// output.weight is always written: lm_head.weight when it differs from wte,
// else wte's bytes again (tied: absent, sharing wte's storage, or the same
// bytes), because llama.cpp's gpt2 loader requires the tensor (its converter
// duplicates it the same way); docs/architectures.md, gpt2 lets readers treat it either
// way. Left out: the attention-mask buffers h.N.attn.bias (nanoGPT on torch < 2.0, HF) and
// h.N.attn.masked_bias (HF). Every bias is optional (nanoGPT's bias=False;
// absent = zero, a kiln extension of the layout). Any other name is an error.
//
// Metadata and names: the gpt2 descriptor's (formats/arch/gpt2_arch.h).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "formats/arch/gpt2_arch.h"
#include "formats/checkpoint/checkpoint.h"

namespace kiln {

// One tensor as a reader found it: torch-order shape (last dimension
// contiguous), its bytes, and where they live (to tell tied weights).
struct SourceTensor {
    std::string name;  // as in the file, for messages
    DType type = DType::F32;
    std::vector<uint64_t> shape;
    std::span<const std::byte> data;
    const void* storage = nullptr;  // same storage and offset = the same tensor (tied)
    uint64_t storage_offset = 0;
};

struct Gpt2Source {
    std::string component;  // "pytorch" or "hf": the kiln::Error component
    std::string path;       // starts messages
    std::map<std::string, SourceTensor> tensors;  // keyed by the names above (without "transformer.")
    bool conv1d = false;                          // matrices stored (in, out)
    bool head_required = false;                   // the config says untied: lm_head.weight must be there
    arch::Gpt2Params hp;  // n_vocab: the source's vocabulary
    std::string hyper_text;  // "n_embd 48 (model_args), ...": where hp came from, for messages
};

// Checks and maps; the result's tensors point into the source's data or the
// result's owned buffers (the caller sets Checkpoint::source).
Checkpoint gpt2_checkpoint(const Gpt2Source& source);

// Refuses hp.n_layers (stated by `stated_by`, e.g. "model_args.n_layer") when
// the tensors hold fewer distinct "h.N." layers (formats/checkpoint/layer_count.h);
// gpt2_checkpoint checks this first as well.
void check_gpt2_layer_count(const Gpt2Source& source, std::string_view stated_by);


}  // namespace kiln
