#!/usr/bin/env python3
"""GPT-2-architecture GGUFs with seeded random weights, and their logits computed
by an independent float64 PyTorch forward written from the architecture's math
(learned positions, pre-LayerNorm, fused QKV split into Q, K, V rows, causal
attention scaled by 1/sqrt(head_dim), GELU tanh MLP, final LayerNorm, tied or
separate head). It tests kiln's gpt2 model directly, without the converter.

Writes tests/fixtures/gpt2/tiny_{bias,nobias}.gguf (the models, llama.cpp's
tensor names; the no-bias one has an untied head) and
tests/fixtures/gpt2/tiny_expected.gguf: per model M, `M.tokens` (I32 prompt),
`M.logits` [n, vocab] (float32 of the float64 result) and `M.greedy` (I32,
16 tokens of greedy continuation computed from float64 logits), plus
`M.min_gap` (smallest top-1/top-2 logit gap over the greedy steps).
Run: /usr/bin/python3 tests/reference/make_gpt2_model_fixtures.py
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gguf_io import ARRAY, FLOAT32, STRING, UINT32, write_gguf  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gpt2")
VOCAB, DIM, HEADS, LAYERS, FFN, CTX, EPS = 53, 36, 3, 2, 76, 40, 1e-5


def make_weights(rng, bias, tied):
    w = {}
    def mat(rows, cols, scale=None):
        return (rng.standard_normal((rows, cols)) * (scale or 1 / math.sqrt(cols))).astype(np.float32)
    def vec(n, scale=0.1):
        return (rng.standard_normal(n) * scale).astype(np.float32)
    w["token_embd.weight"] = mat(VOCAB, DIM, 0.5)
    w["position_embd.weight"] = mat(CTX, DIM, 0.2)
    for i in range(LAYERS):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = (1 + vec(DIM)).astype(np.float32)
        w[p + "attn_qkv.weight"] = mat(3 * DIM, DIM)
        w[p + "attn_output.weight"] = mat(DIM, DIM)
        w[p + "ffn_norm.weight"] = (1 + vec(DIM)).astype(np.float32)
        w[p + "ffn_up.weight"] = mat(FFN, DIM)
        w[p + "ffn_down.weight"] = mat(DIM, FFN)
        if bias:
            w[p + "attn_norm.bias"] = vec(DIM)
            w[p + "attn_qkv.bias"] = vec(3 * DIM)
            w[p + "attn_output.bias"] = vec(DIM)
            w[p + "ffn_norm.bias"] = vec(DIM)
            w[p + "ffn_up.bias"] = vec(FFN)
            w[p + "ffn_down.bias"] = vec(DIM)
    w["output_norm.weight"] = (1 + vec(DIM)).astype(np.float32)
    if bias:
        w["output_norm.bias"] = vec(DIM)
    if not tied:
        w["output.weight"] = mat(VOCAB, DIM, 0.5)
    return w


def forward(w, tokens):
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}
    n = len(tokens)
    hd = DIM // HEADS
    def ln(x, name):
        b = t.get(name + ".bias")
        return torch.nn.functional.layer_norm(x, (DIM,), t[name + ".weight"], b, EPS)
    def lin(x, name):
        y = x @ t[name + ".weight"].T
        return y + t[name + ".bias"] if name + ".bias" in t else y
    x = t["token_embd.weight"][tokens] + t["position_embd.weight"][torch.arange(n)]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i in range(LAYERS):
        p = f"blk.{i}."
        qkv = lin(ln(x, p + "attn_norm"), p + "attn_qkv")
        q, k, v = (qkv[:, j * DIM:(j + 1) * DIM].reshape(n, HEADS, hd).transpose(0, 1) for j in range(3))
        s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        s = s.masked_fill(~causal, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(n, DIM)
        x = x + lin(a, p + "attn_output")
        h = lin(ln(x, p + "ffn_norm"), p + "ffn_up")
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + lin(h, p + "ffn_down")
    x = ln(x, "output_norm")
    head = t["output.weight"] if "output.weight" in t else t["token_embd.weight"]
    return x @ head.T


def write_model(path, w):
    meta = [
        ("general.architecture", STRING, "gpt2"),
        ("general.name", STRING, os.path.basename(path)),
        ("gpt2.context_length", UINT32, CTX),
        ("gpt2.embedding_length", UINT32, DIM),
        ("gpt2.feed_forward_length", UINT32, FFN),
        ("gpt2.block_count", UINT32, LAYERS),
        ("gpt2.attention.head_count", UINT32, HEADS),
        ("gpt2.attention.layer_norm_epsilon", FLOAT32, EPS),
    ]
    write_gguf(path, meta, list(w.items()))


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(2026)
    expected = []
    for name, bias, tied in [("tiny_bias", True, True), ("tiny_nobias", False, False)]:
        w = make_weights(rng, bias, tied)
        write_model(os.path.join(OUT, name + ".gguf"), w)
        tokens = rng.integers(0, VOCAB, 11).tolist()
        logits = forward(w, tokens)
        seq, gaps = list(tokens), []
        for _ in range(16):
            last = forward(w, seq)[-1]
            top2 = torch.topk(last, 2).values
            gaps.append(float(top2[0] - top2[1]))
            seq.append(int(torch.argmax(last)))
        expected += [
            (f"{name}.tokens", np.array(tokens, dtype=np.int32)),
            (f"{name}.logits", logits.numpy().astype(np.float32)),
            (f"{name}.greedy", np.array(seq[len(tokens):], dtype=np.int32)),
            (f"{name}.min_gap", np.array([min(gaps)], dtype=np.float32)),
        ]
        print(f"{name}: min top-2 gap {min(gaps):.4f}")
    write_gguf(os.path.join(OUT, "tiny_expected.gguf"), [("general.architecture", STRING, "fixture")], expected)


if __name__ == "__main__":
    main()
