#!/usr/bin/env python3
"""Writes tests/fixtures/torch/llama_f32_logits.gguf: the logits that the tiny
llama2.c-style PyTorch checkpoint tests/fixtures/torch/llama_f32.pt must give
once kiln-convert has turned it into a GGUF, computed here straight from the
checkpoint with torch.load and the PyTorch Llama reference (llama_reference.py),
with model.py's parameter names mapped to llama.cpp's in this script.

How it was run:  /usr/bin/python3 tests/reference/make_torch_llama_logits.py
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
import llama_reference  # noqa: E402

FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures", "torch"))
TOKENS = [1, 5, 9, 33, 2, 60, 7, 12, 40, 3]

LAYER_NAMES = {
    "attention_norm.weight": "attn_norm.weight",
    "attention.wq.weight": "attn_q.weight",
    "attention.wk.weight": "attn_k.weight",
    "attention.wv.weight": "attn_v.weight",
    "attention.wo.weight": "attn_output.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "feed_forward.w1.weight": "ffn_gate.weight",
    "feed_forward.w2.weight": "ffn_down.weight",
    "feed_forward.w3.weight": "ffn_up.weight",
}


def main():
    torch.set_num_threads(1)
    checkpoint = torch.load(os.path.join(FIXTURES, "llama_f32.pt"), map_location="cpu")  # our own fixture
    args = checkpoint["model_args"]
    weights = {}
    for name, tensor in checkpoint["model"].items():
        array = tensor.float().numpy()
        if name == "tok_embeddings.weight":
            weights["token_embd.weight"] = array
        elif name == "norm.weight":
            weights["output_norm.weight"] = array
        elif name == "output.weight":
            weights["output.weight"] = array
        else:
            _, layer, rest = name.split(".", 2)
            weights["blk.%s.%s" % (layer, LAYER_NAMES[rest])] = array
    meta = {
        "llama.embedding_length": args["dim"],
        "llama.block_count": args["n_layers"],
        "llama.attention.head_count": args["n_heads"],
        "llama.attention.head_count_kv": args["n_kv_heads"],
        "llama.feed_forward_length": weights["blk.0.ffn_gate.weight"].shape[0],
        "llama.attention.layer_norm_rms_epsilon": args.get("norm_eps", 1e-5),
    }
    model = llama_reference.LlamaReference(llama_reference.LlamaConfig(meta), weights)
    logits = model.forward(TOKENS).numpy().astype(np.float32)
    gguf_io.write_gguf(
        os.path.join(FIXTURES, "llama_f32_logits.gguf"),
        [("general.architecture", gguf_io.STRING, "kiln-fixture"),
         ("fixture.generated_by", gguf_io.STRING, "make_torch_llama_logits.py (torch %s)" % torch.__version__)],
        [("tokens", np.array(TOKENS, dtype=np.int32)), ("logits", logits)],
    )
    print("logits", logits.shape, "max |logit| %.3f" % np.abs(logits).max())


if __name__ == "__main__":
    main()
