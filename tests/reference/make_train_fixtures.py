#!/usr/bin/env python3
"""Whole-model training fixtures for kiln-train: a tiny GPT in the gpt2 layout
(docs/architectures.md, gpt2: pre-LN, learned positions, GELU tanh, biases, tied head),
written independently of kiln in PyTorch (float64), with

  - the loss and every parameter's gradient for one batch (targets of -1 are
    ignored, as kiln's padding index), and
  - the parameters and losses of 3 steps of torch.optim.AdamW on that batch
    (betas 0.9/0.95, eps 1e-8, lr 1e-2, weight decay 0.1 on the four weight
    matrices per block, none on norms, biases and embeddings), each after
    torch.nn.utils.clip_grad_norm_(max_norm=1.0).

Run: /usr/bin/python3 tests/reference/make_train_fixtures.py
Writes tests/fixtures/train/tiny_gpt_reference.gguf (deterministic).
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

V, CTX, D, H, L, FF, B = 11, 7, 12, 3, 2, 20, 3
EPS = 1e-5


def param_shapes():
    """(gguf name, torch shape = numpy shape of ggml dims reversed, decayed)."""
    shapes = [("token_embd.weight", (V, D), False), ("position_embd.weight", (CTX, D), False)]
    for l in range(L):
        p = "blk.%d." % l
        shapes += [
            (p + "attn_norm.weight", (D,), False), (p + "attn_norm.bias", (D,), False),
            (p + "attn_qkv.weight", (3 * D, D), True), (p + "attn_qkv.bias", (3 * D,), False),
            (p + "attn_output.weight", (D, D), True), (p + "attn_output.bias", (D,), False),
            (p + "ffn_norm.weight", (D,), False), (p + "ffn_norm.bias", (D,), False),
            (p + "ffn_up.weight", (FF, D), True), (p + "ffn_up.bias", (FF,), False),
            (p + "ffn_down.weight", (D, FF), True), (p + "ffn_down.bias", (D,), False),
        ]
    shapes += [("output_norm.weight", (D,), False), ("output_norm.bias", (D,), False)]
    return shapes


def forward(P, tokens, targets):
    T = tokens.shape[1]
    x = P["token_embd.weight"][tokens] + P["position_embd.weight"][torch.arange(T)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    hd = D // H
    for l in range(L):
        p = "blk.%d." % l
        h = F.layer_norm(x, (D,), P[p + "attn_norm.weight"], P[p + "attn_norm.bias"], EPS)
        qkv = h @ P[p + "attn_qkv.weight"].T + P[p + "attn_qkv.bias"]
        q, k, v = qkv.split(D, dim=2)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + y @ P[p + "attn_output.weight"].T + P[p + "attn_output.bias"]
        h = F.layer_norm(x, (D,), P[p + "ffn_norm.weight"], P[p + "ffn_norm.bias"], EPS)
        u = F.gelu(h @ P[p + "ffn_up.weight"].T + P[p + "ffn_up.bias"], approximate="tanh")
        x = x + u @ P[p + "ffn_down.weight"].T + P[p + "ffn_down.bias"]
    x = F.layer_norm(x, (D,), P["output_norm.weight"], P["output_norm.bias"], EPS)
    logits = x @ P["token_embd.weight"].T
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def main():
    rng = np.random.default_rng(20261122)
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
    targets[1, 3] = -1  # a padding position
    targets[2, 0] = -1

    meta = [
        ("general.architecture", gg.STRING, "gpt2"),
        ("gpt2.context_length", gg.UINT32, CTX), ("gpt2.embedding_length", gg.UINT32, D),
        ("gpt2.feed_forward_length", gg.UINT32, FF), ("gpt2.block_count", gg.UINT32, L),
        ("gpt2.attention.head_count", gg.UINT32, H), ("gpt2.attention.layer_norm_epsilon", gg.FLOAT32, EPS),
        ("test.vocab", gg.UINT32, V), ("test.batch", gg.UINT32, B),
    ]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "train", "tiny_gpt_reference.gguf")
    write_fixture(os.path.normpath(out), shapes, init, forward, tokens, targets, meta)

if __name__ == "__main__":
    main()
