#!/usr/bin/env python3
"""A tiny MiniCPM (llama.cpp's `minicpm` architecture: llama's tensors and
block, with three scalings: token embeddings times minicpm.embedding_scale,
each attention and feed-forward output times minicpm.residual_scale before it
joins the residual stream, logits divided by minicpm.logit_scale; normal RoPE
on adjacent pairs; grouped-query attention; head tied to token_embd), with
seeded random weights, and its logits for a token sequence from an
independent PyTorch forward in float64.

Run: /usr/bin/python3 tests/reference/make_minicpm_fixture.py
Writes tests/fixtures/minicpm/tiny_minicpm.gguf (the model, F32, no tokenizer)
and tiny_minicpm_reference.gguf (tokens, logits), deterministically.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402

V, CTX, D, H, KV, L, FF = 29, 32, 32, 4, 2, 2, 56
HD = D // H
EPS, BASE = 1e-5, 10000.0
# As llama.cpp's converter derives them from MiniCPM's config (scale_emb,
# scale_depth / sqrt(layers), hidden_size / dim_model_base), rounded to the
# float32 the file stores, so the reference computes what the file says.
EMBEDDING_SCALE, RESIDUAL_SCALE, LOGIT_SCALE = (float(np.float32(v)) for v in (12.0, 1.4 / math.sqrt(L), D / 8.0))


def rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rope(x, heads):
    """x: (T, heads * HD); adjacent pairs (2i, 2i+1) of each head rotated by pos * BASE^(-2i/HD)."""
    T = x.shape[0]
    x = x.view(T, heads, HD // 2, 2)
    i = torch.arange(HD // 2, dtype=torch.float64)
    theta = torch.arange(T, dtype=torch.float64)[:, None] * BASE ** (-2.0 * i / HD)
    c, s = torch.cos(theta)[:, None, :], torch.sin(theta)[:, None, :]
    x0, x1 = x[..., 0], x[..., 1]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(T, heads * HD)


def forward(W, tokens):
    T = len(tokens)
    x = W["token_embd.weight"][tokens] * EMBEDDING_SCALE
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = "blk.%d." % l
        h = rms_norm(x, W[p + "attn_norm.weight"])
        q = rope(h @ W[p + "attn_q.weight"].T, H).view(T, H, HD).transpose(0, 1)
        k = rope(h @ W[p + "attn_k.weight"].T, KV).view(T, KV, HD).transpose(0, 1)
        v = (h @ W[p + "attn_v.weight"].T).view(T, KV, HD).transpose(0, 1)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(HD)).masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, D)
        x = x + (y @ W[p + "attn_output.weight"].T) * RESIDUAL_SCALE
        h = rms_norm(x, W[p + "ffn_norm.weight"])
        f = (F.silu(h @ W[p + "ffn_gate.weight"].T) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
        x = x + f * RESIDUAL_SCALE
    return (rms_norm(x, W["output_norm.weight"]) @ W["token_embd.weight"].T) / LOGIT_SCALE


def main():
    rng = np.random.default_rng(20261125)
    shapes = [("token_embd.weight", (V, D)), ("output_norm.weight", (D,))]
    for l in range(L):
        p = "blk.%d." % l
        shapes += [(p + "attn_q.weight", (D, D)), (p + "attn_k.weight", (KV * HD, D)), (p + "attn_v.weight", (KV * HD, D)),
                   (p + "attn_output.weight", (D, D)), (p + "attn_norm.weight", (D,)), (p + "ffn_gate.weight", (FF, D)),
                   (p + "ffn_down.weight", (D, FF)), (p + "ffn_up.weight", (FF, D)), (p + "ffn_norm.weight", (D,))]
    weights = {}
    for name, shape in shapes:
        base = 1.0 if name.endswith("norm.weight") else 0.0
        scale = 0.1 if name.endswith("norm.weight") else (0.1 if name == "token_embd.weight" else 0.2)
        weights[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    meta = [
        ("general.architecture", gg.STRING, "minicpm"), ("general.name", gg.STRING, "tiny minicpm"),
        ("minicpm.context_length", gg.UINT32, CTX), ("minicpm.embedding_length", gg.UINT32, D),
        ("minicpm.feed_forward_length", gg.UINT32, FF), ("minicpm.attention.head_count", gg.UINT32, H),
        ("minicpm.attention.head_count_kv", gg.UINT32, KV), ("minicpm.block_count", gg.UINT32, L),
        ("minicpm.rope.dimension_count", gg.UINT32, HD),
        ("minicpm.attention.layer_norm_rms_epsilon", gg.FLOAT32, EPS),
        ("minicpm.embedding_scale", gg.FLOAT32, EMBEDDING_SCALE),
        ("minicpm.residual_scale", gg.FLOAT32, RESIDUAL_SCALE),
        ("minicpm.logit_scale", gg.FLOAT32, LOGIT_SCALE),
    ]
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.normpath(os.path.join(here, "..", "fixtures", "minicpm"))
    gg.write_gguf(os.path.join(out, "tiny_minicpm.gguf"), meta, [(n, weights[n]) for n, _ in shapes])

    tokens = rng.integers(0, V, size=17).astype(np.int32)
    W = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    logits = forward(W, torch.tensor(tokens, dtype=torch.long)).numpy().astype(np.float32)
    gg.write_gguf(os.path.join(out, "tiny_minicpm_reference.gguf"), [("fixture.tokens", gg.UINT32, len(tokens))],
                  [("tokens", tokens), ("logits", logits)])
    print("wrote", out, "logits range %.4f .. %.4f" % (logits.min(), logits.max()))


if __name__ == "__main__":
    main()
