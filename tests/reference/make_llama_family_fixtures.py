#!/usr/bin/env python3
"""Tiny random-weight models of llama's family as llama.cpp's files describe
them, and their logits from an independent PyTorch forward in float64, written
from the published modelling code (Hugging Face's modeling_llama / modeling_qwen2
and their rope initialisations: default, linear, llama3 frequency factors, YaRN).

  qwen2         qwen2: q/k/v biases, NEOX rope (rotate_half), base 1e6, GQA, tied head
  llama3        llama: rope_freqs.weight (Llama 3.1's factors), base 500000, untied head
  llama_linear  llama: rope.scaling.type linear (factor 2.5), a head size that is
                not width/heads (attention.key_length 12), every optional bias
  llama_yarn    llama: rope.scaling.type yarn (factor 4, original context 64,
                attn_factor 0.95), adjacent pairs

The GGUF layout is llama.cpp's: llama's q/k rows are in the order the HF
converter permutes them to, so its rope rotates adjacent pairs; qwen2 is not
permuted and rotates halves. Weights are large enough that every piece moves
the logits.

Run: /usr/bin/python3 tests/reference/make_llama_family_fixtures.py
Writes tests/fixtures/llama_family/<name>.gguf and <name>_reference.gguf (tokens, logits).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402

V, CTX, L, FF, EPS = 29, 96, 2, 56, 1e-5


def rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def inverse_frequencies(cfg):
    """HF's rope initialisation: inv_freq per pair, and the attention (magnitude) factor."""
    hd, base = cfg["head_dim"], cfg["base"]
    inv = 1.0 / base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    mscale = 1.0
    scaling = cfg.get("scaling")
    if cfg.get("freq_factors") is not None:
        inv = inv / torch.tensor(cfg["freq_factors"], dtype=torch.float64)
    if scaling is None:
        return inv, mscale
    if scaling["type"] == "linear":
        return inv / scaling["factor"], mscale
    # YaRN (modeling_rope_utils._compute_yarn_parameters)
    factor, orig = scaling["factor"], scaling["original_context"]
    beta_fast, beta_slow = 32.0, 1.0

    def correction_dim(rotations):
        return (hd * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), hd - 1)
    ramp = torch.clamp((torch.arange(hd // 2, dtype=torch.float64) - low) / max(high - low, 0.001), 0, 1)
    extrapolation_weight = 1 - ramp
    inv = (inv / factor) * (1 - extrapolation_weight) + inv * extrapolation_weight
    mscale = (0.1 * math.log(factor) + 1.0) * scaling.get("attn_factor", 1.0)
    return inv, mscale


def rope(x, heads, cfg):
    """x: (T, heads * hd). neox: rotate_half on halves; else adjacent pairs."""
    T, hd = x.shape[0], cfg["head_dim"]
    inv, mscale = inverse_frequencies(cfg)
    theta = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    c, s = (torch.cos(theta) * mscale)[:, None, :], (torch.sin(theta) * mscale)[:, None, :]
    x = x.view(T, heads, hd)
    if cfg["neox"]:
        x0, x1 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1).reshape(T, heads * hd)
    x = x.view(T, heads, hd // 2, 2)
    x0, x1 = x[..., 0], x[..., 1]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(T, heads * hd)


def forward(W, tokens, cfg):
    T, D, H, KV, hd = len(tokens), cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    x = W["token_embd.weight"][tokens]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def lin(p, name, h):
        y = h @ W[p + name + ".weight"].T
        return y + W[p + name + ".bias"] if (p + name + ".bias") in W else y

    for l in range(L):
        p = "blk.%d." % l
        h = rms_norm(x, W[p + "attn_norm.weight"])
        q = rope(lin(p, "attn_q", h), H, cfg).view(T, H, hd).transpose(0, 1)
        k = rope(lin(p, "attn_k", h), KV, cfg).view(T, KV, hd).transpose(0, 1)
        v = lin(p, "attn_v", h).view(T, KV, hd).transpose(0, 1)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hd)).masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, H * hd)
        x = x + lin(p, "attn_output", y)
        h = rms_norm(x, W[p + "ffn_norm.weight"])
        x = x + lin(p, "ffn_down", F.silu(lin(p, "ffn_gate", h)) * lin(p, "ffn_up", h))
    head = W["output.weight"] if "output.weight" in W else W["token_embd.weight"]
    return rms_norm(x, W["output_norm.weight"]) @ head.T


def llama3_factors(hd, base):
    """Llama 3.1's rope_freqs (HF _compute_llama3_parameters with factor 8, low 1, high 4,
    original context 8192), scaled down to this head size's wavelengths: 1 for the fast
    frequencies, 8 for the slow, smooth between."""
    factor, low_ff, high_ff, orig = 8.0, 1.0, 4.0, 16
    out = []
    for i in range(hd // 2):
        freq = 1.0 / base ** (2 * i / hd)
        wavelen = 2 * math.pi / freq
        if wavelen < orig / high_ff:
            out.append(1.0)
        elif wavelen > orig / low_ff:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low_ff) / (high_ff - low_ff)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


def make(name, arch, cfg, rng, out_dir):
    D, H, KV, hd = cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    q_dim, kv_dim = H * hd, KV * hd
    shapes = []
    if cfg.get("freq_factors") is not None:
        shapes.append(("rope_freqs.weight", None))
    shapes += [("token_embd.weight", (V, D)), ("output_norm.weight", (D,))]
    if not cfg["tied"]:
        shapes.append(("output.weight", (V, D)))
    for l in range(L):
        p = "blk.%d." % l
        shapes += [(p + "attn_norm.weight", (D,)), (p + "attn_q.weight", (q_dim, D)), (p + "attn_k.weight", (kv_dim, D)),
                   (p + "attn_v.weight", (kv_dim, D)), (p + "attn_output.weight", (D, q_dim))]
        if cfg["qkv_bias"] or cfg.get("all_biases"):
            shapes += [(p + "attn_q.bias", (q_dim,)), (p + "attn_k.bias", (kv_dim,)), (p + "attn_v.bias", (kv_dim,))]
        if cfg.get("all_biases"):
            shapes += [(p + "attn_output.bias", (D,))]
        shapes += [(p + "ffn_norm.weight", (D,)), (p + "ffn_gate.weight", (FF, D)), (p + "ffn_down.weight", (D, FF)),
                   (p + "ffn_up.weight", (FF, D))]
        if cfg.get("all_biases"):
            shapes += [(p + "ffn_gate.bias", (FF,)), (p + "ffn_down.bias", (D,)), (p + "ffn_up.bias", (FF,))]
    weights = {}
    for n, shape in shapes:
        if n == "rope_freqs.weight":
            weights[n] = np.array(cfg["freq_factors"], dtype=np.float32)
        elif n.endswith("norm.weight"):
            weights[n] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif n.endswith(".bias"):
            weights[n] = (0.3 * rng.standard_normal(shape)).astype(np.float32)
        else:
            weights[n] = (0.2 * rng.standard_normal(shape)).astype(np.float32)
    if cfg.get("freq_factors") is not None:
        cfg["freq_factors"] = [float(v) for v in weights["rope_freqs.weight"]]  # what the file says
    meta = [
        ("general.architecture", gg.STRING, arch), ("general.name", gg.STRING, name),
        (arch + ".context_length", gg.UINT32, CTX), (arch + ".embedding_length", gg.UINT32, D),
        (arch + ".feed_forward_length", gg.UINT32, FF), (arch + ".attention.head_count", gg.UINT32, H),
        (arch + ".attention.head_count_kv", gg.UINT32, KV), (arch + ".block_count", gg.UINT32, L),
        (arch + ".rope.freq_base", gg.FLOAT32, cfg["base"]),
        (arch + ".attention.layer_norm_rms_epsilon", gg.FLOAT32, EPS),
    ]
    if hd * H != D:
        meta += [(arch + ".attention.key_length", gg.UINT32, hd), (arch + ".attention.value_length", gg.UINT32, hd)]
    if arch == "llama":
        meta += [(arch + ".rope.dimension_count", gg.UINT32, hd), (arch + ".vocab_size", gg.UINT32, V)]
    scaling = cfg.get("scaling")
    if scaling is not None:
        meta += [(arch + ".rope.scaling.type", gg.STRING, scaling["type"]),
                 (arch + ".rope.scaling.factor", gg.FLOAT32, scaling["factor"])]
        if scaling["type"] == "yarn":
            meta += [(arch + ".rope.scaling.original_context_length", gg.UINT32, scaling["original_context"]),
                     (arch + ".rope.scaling.attn_factor", gg.FLOAT32, scaling["attn_factor"])]
    gg.write_gguf(os.path.join(out_dir, name + ".gguf"), meta, [(n, weights[n]) for n, _ in shapes])
    tokens = rng.integers(0, V, size=40).astype(np.int32)
    W = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items() if n != "rope_freqs.weight"}
    # The file's float32 values of the float hyper-parameters are what a reader computes with.
    cfg["base"] = float(np.float32(cfg["base"]))
    if scaling is not None:
        for k in ("factor", "attn_factor"):
            if k in scaling:
                scaling[k] = float(np.float32(scaling[k]))
    logits = forward(W, torch.tensor(tokens, dtype=torch.long), cfg).numpy().astype(np.float32)
    gg.write_gguf(os.path.join(out_dir, name + "_reference.gguf"), [("fixture.tokens", gg.UINT32, len(tokens))],
                  [("tokens", tokens), ("logits", logits)])
    print("wrote", name, "logits range %.4f .. %.4f" % (logits.min(), logits.max()))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.normpath(os.path.join(here, "..", "fixtures", "llama_family"))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261125)
    base = dict(dim=32, heads=4, kv_heads=2, head_dim=8)
    make("qwen2", "qwen2", dict(base, base=1e6, neox=True, qkv_bias=True, tied=True), rng, out)
    make("llama3", "llama", dict(base, dim=48, heads=4, head_dim=12, base=500000.0, neox=False, qkv_bias=False,
                                 tied=False, freq_factors=llama3_factors(12, 500000.0)), rng, out)
    make("llama_linear", "llama", dict(base, head_dim=12, base=10000.0, neox=False, qkv_bias=False, tied=True,
                                       all_biases=True, scaling=dict(type="linear", factor=2.5)), rng, out)
    make("llama_yarn", "llama", dict(dim=64, heads=4, kv_heads=2, head_dim=16, base=10000.0, neox=False,
                                     qkv_bias=False, tied=False,
                                     scaling=dict(type="yarn", factor=4.0, original_context=64, attn_factor=0.95)),
         rng, out)


if __name__ == "__main__":
    main()
