#!/usr/bin/env python3
"""Tiny random-weight Gemma and Gemma 2 models as llama.cpp's files describe
them, and their logits from an independent PyTorch forward in float64, written
from Hugging Face's modeling_gemma / modeling_gemma2 (GemmaForCausalLM,
Gemma2ForCausalLM with eager attention):

  gemma2  26 layers (llama.cpp's "2B" rule: queries scaled by 1/sqrt(head size)),
          heads of 12 in a width of 32 (so width/heads = 8 differs), GQA,
          sliding window 6 on the even layers, attention soft-cap 8, final
          logit soft-cap 4 (both small enough to bite), tied head
  gemma   2 layers, heads of 16 in a width of 32, no post norms, caps or window

The file's norm weights are Hugging Face's (1 + weight), as convert_hf_to_gguf
writes them; the reference applies Gemma's RMSNorm to (weight_file - 1).

Run: /usr/bin/python3 tests/reference/make_gemma_fixtures.py
Writes tests/fixtures/gemma/<name>.gguf and <name>_reference.gguf (tokens, logits).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402

V, CTX, EPS, T = 29, 96, 1e-6, 40


def gemma_rms_norm(x, hf_weight):
    # Gemma's RMSNorm: x / rms(x) * (1 + weight)
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * (1.0 + hf_weight)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, hd, base):
    """x: (heads, T, hd); Hugging Face's rotary embedding (cos/sin over duplicated halves)."""
    inv = 1.0 / base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    theta = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((theta, theta), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def forward(W, tokens, cfg):
    n, D, H, KV, hd = len(tokens), cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    gemma2 = cfg["gemma2"]
    hf = lambda name: W[name] - 1.0  # noqa: E731  the file's norm weight back to HF's
    x = W["token_embd.weight"][tokens] * torch.tensor(D ** 0.5, dtype=torch.float64)
    q_pos = torch.arange(n)[:, None]
    k_pos = torch.arange(n)[None, :]
    causal = k_pos <= q_pos
    for layer in range(cfg["layers"]):
        p = "blk.%d." % layer
        residual = x
        h = gemma_rms_norm(x, hf(p + "attn_norm.weight"))
        q = (h @ W[p + "attn_q.weight"].T).view(n, H, hd).transpose(0, 1)
        k = (h @ W[p + "attn_k.weight"].T).view(n, KV, hd).transpose(0, 1)
        v = (h @ W[p + "attn_v.weight"].T).view(n, KV, hd).transpose(0, 1)
        q, k = apply_rope(q, hd, cfg["base"]), apply_rope(k, hd, cfg["base"])
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        scores = (q @ k.transpose(-2, -1)) * cfg["query_pre_attn_scalar"] ** -0.5
        if gemma2:
            cap = cfg["attn_softcap"]
            scores = torch.tanh(scores / cap) * cap
        allowed = causal
        if gemma2 and layer % 2 == 0:  # sliding-window layers: keys older than the window are masked
            allowed = allowed & ~(q_pos - k_pos >= cfg["window"])
        att = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        h = (att @ v).transpose(0, 1).reshape(n, H * hd) @ W[p + "attn_output.weight"].T
        if gemma2:
            h = gemma_rms_norm(h, hf(p + "post_attention_norm.weight"))
        x = residual + h
        residual = x
        h = gemma_rms_norm(x, hf(p + "ffn_norm.weight"))
        gate = F.gelu(h @ W[p + "ffn_gate.weight"].T, approximate="tanh")
        h = (gate * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
        if gemma2:
            h = gemma_rms_norm(h, hf(p + "post_ffw_norm.weight"))
        x = residual + h
    logits = gemma_rms_norm(x, hf("output_norm.weight")) @ W["token_embd.weight"].T
    if gemma2:
        cap = cfg["final_softcap"]
        logits = torch.tanh(logits / cap) * cap
    return logits


def make(name, cfg, rng, out_dir):
    arch = "gemma2" if cfg["gemma2"] else "gemma"
    D, H, KV, hd, FF, L = cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"], cfg["layers"]
    shapes = [("token_embd.weight", (V, D)), ("output_norm.weight", (D,))]
    for layer in range(L):
        p = "blk.%d." % layer
        shapes += [(p + "attn_norm.weight", (D,)), (p + "attn_q.weight", (H * hd, D)), (p + "attn_k.weight", (KV * hd, D)),
                   (p + "attn_v.weight", (KV * hd, D)), (p + "attn_output.weight", (D, H * hd))]
        if cfg["gemma2"]:
            shapes.append((p + "post_attention_norm.weight", (D,)))
        shapes += [(p + "ffn_norm.weight", (D,)), (p + "ffn_gate.weight", (FF, D)), (p + "ffn_up.weight", (FF, D)),
                   (p + "ffn_down.weight", (D, FF))]
        if cfg["gemma2"]:
            shapes.append((p + "post_ffw_norm.weight", (D,)))
    weights = {}
    for n, shape in shapes:
        if n.endswith("norm.weight"):
            weights[n] = (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        else:
            weights[n] = (cfg["scale"] * rng.standard_normal(shape)).astype(np.float32)
    meta = [
        ("general.architecture", gg.STRING, arch), ("general.name", gg.STRING, name),
        (arch + ".context_length", gg.UINT32, CTX), (arch + ".embedding_length", gg.UINT32, D),
        (arch + ".block_count", gg.UINT32, L), (arch + ".feed_forward_length", gg.UINT32, FF),
        (arch + ".attention.head_count", gg.UINT32, H), (arch + ".attention.head_count_kv", gg.UINT32, KV),
        (arch + ".attention.layer_norm_rms_epsilon", gg.FLOAT32, EPS),
        (arch + ".attention.key_length", gg.UINT32, hd), (arch + ".attention.value_length", gg.UINT32, hd),
        (arch + ".rope.freq_base", gg.FLOAT32, cfg["base"]),
    ]
    if cfg["gemma2"]:
        meta += [(arch + ".attn_logit_softcapping", gg.FLOAT32, cfg["attn_softcap"]),
                 (arch + ".final_logit_softcapping", gg.FLOAT32, cfg["final_softcap"]),
                 (arch + ".attention.sliding_window", gg.UINT32, cfg["window"])]
    gg.write_gguf(os.path.join(out_dir, name + ".gguf"), meta, [(n, weights[n]) for n, _ in shapes])
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    W = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    logits = forward(W, torch.tensor(tokens, dtype=torch.long), cfg).numpy().astype(np.float32)
    gg.write_gguf(os.path.join(out_dir, name + "_reference.gguf"), [("fixture.tokens", gg.UINT32, len(tokens))],
                  [("tokens", tokens), ("logits", logits)])
    print("wrote", name, "logits range %.4f .. %.4f" % (logits.min(), logits.max()))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.normpath(os.path.join(here, "..", "fixtures", "gemma"))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261126)
    # 26 layers: llama.cpp's Gemma 2 "2B" size class, whose query scale is 1/sqrt(head size)
    make("gemma2", dict(gemma2=True, layers=26, dim=32, heads=4, kv_heads=2, head_dim=12, ffn=48, base=10000.0,
                        query_pre_attn_scalar=12, window=6, attn_softcap=8.0, final_softcap=4.0, scale=0.25),
         rng, out)
    make("gemma", dict(gemma2=False, layers=2, dim=32, heads=4, kv_heads=1, head_dim=16, ffn=48, base=10000.0,
                       query_pre_attn_scalar=16, scale=0.2), rng, out)


if __name__ == "__main__":
    main()
