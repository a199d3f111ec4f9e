#!/usr/bin/env python3
"""Whole-model training fixture for kiln-train --arch llama: a tiny Llama in
llama.cpp's llama layout (RMSNorm, RoPE on adjacent pairs of the first n_rot
dimensions of each head, as llama.cpp's rope mode 0 and kiln's rope op;
grouped-query attention; SwiGLU; untied output), written independently of
kiln in PyTorch (float64), with

  - the loss and every parameter's gradient for one batch (targets of -1 are
    ignored, as kiln's padding index), and
  - the parameters and losses of 3 steps of torch.optim.AdamW on that batch
    (betas 0.9/0.95, eps 1e-8, lr 1e-2, weight decay 0.1 on the matrices,
    none on norms and the embedding), each after clip_grad_norm_(1.0).

Run: /usr/bin/python3 tests/reference/make_llama_train_fixture.py
Writes tests/fixtures/train/tiny_llama_reference.gguf (deterministic).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402
from torch_train_fixture import write_fixture  # noqa: E402

V, CTX, D, H, KV, L, FF, B = 13, 7, 24, 4, 2, 2, 40, 2
HD = D // H
N_ROT = 4  # of HD = 6: the last two dimensions of every head are not rotated
EPS, BASE = 1e-5, 10000.0


def param_shapes():
    """(gguf name, torch shape = numpy shape of ggml dims reversed, decayed), in llama.cpp's file order."""
    shapes = [("token_embd.weight", (V, D), False), ("output_norm.weight", (D,), False),
              ("output.weight", (V, D), True)]
    for l in range(L):
        p = "blk.%d." % l
        shapes += [
            (p + "attn_q.weight", (H * HD, D), True), (p + "attn_k.weight", (KV * HD, D), True),
            (p + "attn_v.weight", (KV * HD, D), True), (p + "attn_output.weight", (D, H * HD), True),
            (p + "attn_norm.weight", (D,), False), (p + "ffn_gate.weight", (FF, D), True),
            (p + "ffn_down.weight", (D, FF), True), (p + "ffn_up.weight", (FF, D), True),
            (p + "ffn_norm.weight", (D,), False),
        ]
    return shapes


def rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rope(x, heads):
    """x: (B, T, heads * HD); rotates pairs (2i, 2i+1), i < N_ROT / 2, of each head by pos * BASE^(-2i/N_ROT)."""
    T = x.shape[1]
    x = x.view(B, T, heads, HD)
    i = torch.arange(N_ROT // 2, dtype=torch.float64)
    theta = torch.arange(T, dtype=torch.float64)[:, None] * BASE ** (-2.0 * i / N_ROT)  # (T, N_ROT/2)
    c, s = torch.cos(theta)[None, :, None, :], torch.sin(theta)[None, :, None, :]
    x0, x1 = x[..., 0:N_ROT:2], x[..., 1:N_ROT:2]
    r0, r1 = x0 * c - x1 * s, x0 * s + x1 * c
    rotated = torch.stack((r0, r1), dim=-1).reshape(B, T, heads, N_ROT)
    return torch.cat((rotated, x[..., N_ROT:]), dim=-1).reshape(B, T, heads * HD)


def forward(P, tokens, targets):
    T = tokens.shape[1]
    x = P["token_embd.weight"][tokens]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = "blk.%d." % l
        h = rms_norm(x, P[p + "attn_norm.weight"])
        q = rope(h @ P[p + "attn_q.weight"].T, H).view(B, T, H, HD).transpose(1, 2)
        k = rope(h @ P[p + "attn_k.weight"].T, KV).view(B, T, KV, HD).transpose(1, 2)
        v = (h @ P[p + "attn_v.weight"].T).view(B, T, KV, HD).transpose(1, 2)
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)  # head h reads kv head h // 2
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HD)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * HD)
        x = x + y @ P[p + "attn_output.weight"].T
        h = rms_norm(x, P[p + "ffn_norm.weight"])
        u = F.silu(h @ P[p + "ffn_gate.weight"].T) * (h @ P[p + "ffn_up.weight"].T)
        x = x + u @ P[p + "ffn_down.weight"].T
    logits = rms_norm(x, P["output_norm.weight"]) @ P["output.weight"].T
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def main():
    rng = np.random.default_rng(20261124)
    shapes = param_shapes()
    init = {}
    for name, shape, _ in shapes:
        if name.endswith("norm.weight"):
            init[name] = 1.0 + 0.2 * rng.standard_normal(shape)
        else:
            init[name] = 0.3 * rng.standard_normal(shape)
        init[name] = init[name].astype(np.float32)  # kiln holds float32: start from the same values
    tokens = rng.integers(0, V, size=(B, CTX)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, CTX)).astype(np.int32)
    targets[1, 2] = -1  # a padding position

    meta = [
        ("general.architecture", gg.STRING, "llama"),
        ("llama.context_length", gg.UINT32, CTX), ("llama.embedding_length", gg.UINT32, D),
        ("llama.feed_forward_length", gg.UINT32, FF), ("llama.attention.head_count", gg.UINT32, H),
        ("llama.attention.head_count_kv", gg.UINT32, KV), ("llama.block_count", gg.UINT32, L),
        ("llama.rope.dimension_count", gg.UINT32, N_ROT),
        ("llama.attention.layer_norm_rms_epsilon", gg.FLOAT32, EPS),
        ("test.vocab", gg.UINT32, V), ("test.batch", gg.UINT32, B),
    ]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "train", "tiny_llama_reference.gguf")
    write_fixture(os.path.normpath(out), shapes, init, forward, tokens, targets, meta)

if __name__ == "__main__":
    main()
