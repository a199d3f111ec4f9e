#!/usr/bin/env python3
"""Tiny random-weight Phi-3 models as llama.cpp's files describe them, and their
logits from an independent PyTorch forward in float64, written from Hugging
Face's modeling_phi3 (Phi3ForCausalLM, eager attention) and its LongRoPE
initialisation (modeling_rope_utils._compute_longrope_parameters):

  phi3           fused qkv_proj and gate_up_proj, NEOX rope (rotate_half), GQA,
                 a sliding window of 5 on every layer, untied head
  phi3_longrope  the same with rope_factors_long/short (LongRoPE), trained
                 context 128 from an original 32, attn_factor
                 sqrt(1 + ln 4 / ln 32) as convert_hf_to_gguf writes it, no
                 window (Phi-4's sliding_window 0)

LongRoPE's factor set depends on the context: llama.cpp picks long factors when
the context per sequence passes the original context, Hugging Face when the
sequence does. The reference holds logits with each: `logits_long` over all
tokens (a kiln session of 64 positions), `logits_short` over the first 24 (a
session of 32).

Run: /usr/bin/python3 tests/reference/make_phi3_fixtures.py
Writes tests/fixtures/phi3/<name>.gguf and <name>_reference.gguf.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402

V, EPS, T, SHORT_T = 29, 1e-5, 40, 24


def rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, hd, base, ext_factors, attention_factor):
    """x: (heads, n, hd). LongRoPE divides each frequency by its factor and scales cos/sin."""
    inv = 1.0 / (ext_factors * base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    theta = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((theta, theta), dim=-1)
    return x * (emb.cos() * attention_factor) + rotate_half(x) * (emb.sin() * attention_factor)


def forward(W, tokens, cfg, factors):
    n, D, H, KV, FF = len(tokens), cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"]
    hd = D // H
    ext = torch.tensor(factors, dtype=torch.float64) if factors is not None else torch.ones(hd // 2, dtype=torch.float64)
    q_pos, k_pos = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = k_pos <= q_pos
    if cfg["window"] > 0:
        allowed = allowed & ~(q_pos - k_pos >= cfg["window"])
    x = W["token_embd.weight"][tokens]
    for layer in range(cfg["layers"]):
        p = "blk.%d." % layer
        h = rms_norm(x, W[p + "attn_norm.weight"])
        qkv = h @ W[p + "attn_qkv.weight"].T
        q = qkv[:, :D].reshape(n, H, hd).transpose(0, 1)
        k = qkv[:, D:D + KV * hd].reshape(n, KV, hd).transpose(0, 1)
        v = qkv[:, D + KV * hd:].reshape(n, KV, hd).transpose(0, 1)
        q = apply_rope(q, hd, cfg["base"], ext, cfg["attn_factor"])
        k = apply_rope(k, hd, cfg["base"], ext, cfg["attn_factor"])
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hd)).masked_fill(~allowed, float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(0, 1).reshape(n, D) @ W[p + "attn_output.weight"].T
        h = rms_norm(x, W[p + "ffn_norm.weight"])
        gate, up = (h @ W[p + "ffn_up.weight"].T).chunk(2, dim=-1)
        x = x + (up * F.silu(gate)) @ W[p + "ffn_down.weight"].T
    return rms_norm(x, W["output_norm.weight"]) @ W["output.weight"].T


def make(name, cfg, rng, out_dir):
    D, H, KV, FF, L = cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["layers"]
    hd = D // H
    shapes = [("token_embd.weight", (V, D))]
    if cfg["longrope"]:
        shapes += [("rope_factors_long.weight", (hd // 2,)), ("rope_factors_short.weight", (hd // 2,))]
    for layer in range(L):
        p = "blk.%d." % layer
        shapes += [(p + "attn_norm.weight", (D,)), (p + "attn_qkv.weight", (D + 2 * KV * hd, D)),
                   (p + "attn_output.weight", (D, D)), (p + "ffn_norm.weight", (D,)),
                   (p + "ffn_up.weight", (2 * FF, D)), (p + "ffn_down.weight", (D, FF))]
    shapes += [("output_norm.weight", (D,)), ("output.weight", (V, D))]
    weights = {}
    for n, shape in shapes:
        if n == "rope_factors_long.weight":
            weights[n] = np.linspace(1.0, 6.0, hd // 2).astype(np.float32)
        elif n == "rope_factors_short.weight":
            weights[n] = np.linspace(1.0, 1.8, hd // 2).astype(np.float32)
        elif n.endswith("norm.weight"):
            weights[n] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            weights[n] = (0.2 * rng.standard_normal(shape)).astype(np.float32)
    ctx, orig = cfg["context"], cfg["original_context"]
    attn_factor = math.sqrt(1 + math.log(ctx / orig) / math.log(orig)) if cfg["longrope"] else 1.0
    meta = [
        ("general.architecture", gg.STRING, "phi3"), ("general.name", gg.STRING, name),
        ("phi3.context_length", gg.UINT32, ctx), ("phi3.rope.scaling.original_context_length", gg.UINT32, orig),
        ("phi3.embedding_length", gg.UINT32, D), ("phi3.feed_forward_length", gg.UINT32, FF),
        ("phi3.block_count", gg.UINT32, L), ("phi3.attention.head_count", gg.UINT32, H),
        ("phi3.attention.head_count_kv", gg.UINT32, KV), ("phi3.attention.layer_norm_rms_epsilon", gg.FLOAT32, EPS),
        ("phi3.rope.dimension_count", gg.UINT32, hd), ("phi3.rope.freq_base", gg.FLOAT32, cfg["base"]),
        ("phi3.attention.sliding_window", gg.UINT32, cfg["window"]),
    ]
    if cfg["longrope"]:
        meta.append(("phi3.rope.scaling.attn_factor", gg.FLOAT32, attn_factor))
    gg.write_gguf(os.path.join(out_dir, name + ".gguf"), meta, [(n, weights[n]) for n, _ in shapes])
    cfg["attn_factor"] = float(np.float32(attn_factor))  # what a reader of the file computes with
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    W = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    t = torch.tensor(tokens, dtype=torch.long)
    long_f = [float(v) for v in weights["rope_factors_long.weight"]] if cfg["longrope"] else None
    short_f = [float(v) for v in weights["rope_factors_short.weight"]] if cfg["longrope"] else None
    logits_long = forward(W, t, cfg, long_f).numpy().astype(np.float32)
    logits_short = forward(W, t[:SHORT_T], cfg, short_f).numpy().astype(np.float32)
    gg.write_gguf(os.path.join(out_dir, name + "_reference.gguf"), [("fixture.tokens", gg.UINT32, len(tokens))],
                  [("tokens", tokens), ("logits", logits_long), ("logits_short", logits_short)])
    print("wrote", name, "logits range %.4f .. %.4f" % (logits_long.min(), logits_long.max()))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.normpath(os.path.join(here, "..", "fixtures", "phi3"))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261127)
    make("phi3", dict(layers=2, dim=32, heads=4, kv_heads=2, ffn=48, base=10000.0, context=96, original_context=96,
                      window=5, longrope=False), rng, out)
    make("phi3_longrope", dict(layers=2, dim=48, heads=4, kv_heads=4, ffn=40, base=10000.0, context=128,
                               original_context=32, window=0, longrope=True), rng, out)


if __name__ == "__main__":
    main()
