#!/usr/bin/env python3
"""Attention probabilities of every layer and head, from independent references,
for tests/test_attention_weights.cpp (kiln-viz attention's numbers).

1. The encoder-decoder: the torch.nn.Transformer models of
   make_transformer_model_fixtures.py (tests/fixtures/transformer/tiny_*.gguf),
   rebuilt from the GGUF weights in float64, run with PyTorch's own
   nn.MultiheadAttention asked for its weights (need_weights=True,
   average_attn_weights=False): the encoder's self-attention, the decoder's
   causal self-attention and the cross-attention, per layer and head.
2. A Llama: stories260K.gguf, and tests/fixtures/llama_family/llama3.gguf
   (grouped-query attention, Llama 3.1's rope_freqs factors), in float64, written here from the model's
   definition (RMSNorm, RoPE on adjacent pairs, causal softmax(q k^T / sqrt(d))),
   not from kiln's code; softmax probabilities per layer and head.
3. Gemma 2 (tests/fixtures/gemma/gemma2.gguf: query scale, attention soft cap,
   sliding window on the even layers) through make_gemma_fixtures.py's own
   float64 forward, its softmax outputs recorded.

Writes tests/fixtures/attention/attention_expected.gguf:
  M.source, M.target (I32) and M.encoder, M.decoder, M.cross for M in
  tiny_postln, tiny_preln; stories260K.tokens (I32) and stories260K.self;
  llama3.tokens and llama3.self; gemma2.tokens and gemma2.self.
  Arrays are [layers, heads, queries, keys] (numpy order).
Run: /usr/bin/python3 tests/reference/make_attention_fixtures.py [--model stories260K.gguf]
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
from make_transformer_model_fixtures import DIM, Seq2Seq  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "fixtures")
DEFAULT_MODEL = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "models", "stories260K.gguf"))
# "Once upon a time, there was a little girl named Lily" as stories260K's tokenizer spells it.
STORY_TOKENS = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317]


def load_seq2seq(path, norm_first):
    """nn.Transformer with the GGUF's weights (the inverse of make_transformer_model_fixtures.to_gguf)."""
    w = {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in gguf_io.read_gguf(path).tensors.items()}
    model = Seq2Seq(norm_first).double()
    sd = {"src_embed.weight": w["token_embd.weight"], "tgt_embed.weight": w["dec.token_embd.weight"],
          "generator.weight": w["output.weight"], "generator.bias": w["output.bias"]}

    def attn(prefix, torch_prefix):
        sd[torch_prefix + ".in_proj_weight"] = torch.cat([w[f"{prefix}_{p}.weight"] for p in "qkv"])
        sd[torch_prefix + ".in_proj_bias"] = torch.cat([w[f"{prefix}_{p}.bias"] for p in "qkv"])
        sd[torch_prefix + ".out_proj.weight"] = w[prefix + "_o.weight"]
        sd[torch_prefix + ".out_proj.bias"] = w[prefix + "_o.bias"]

    def affine(name, torch_name):
        sd[torch_name + ".weight"] = w[name + ".weight"]
        sd[torch_name + ".bias"] = w[name + ".bias"]

    for i in range(len(model.transformer.encoder.layers)):
        p, q = f"enc.blk.{i}.", f"transformer.encoder.layers.{i}."
        attn(p + "attn", q + "self_attn")
        for a, b in [("attn_norm", "norm1"), ("ffn_up", "linear1"), ("ffn_down", "linear2"), ("ffn_norm", "norm2")]:
            affine(p + a, q + b)
    affine("enc.output_norm", "transformer.encoder.norm")
    for i in range(len(model.transformer.decoder.layers)):
        p, q = f"dec.blk.{i}.", f"transformer.decoder.layers.{i}."
        attn(p + "attn", q + "self_attn")
        attn(p + "cross_attn", q + "multihead_attn")
        for a, b in [("attn_norm", "norm1"), ("cross_attn_norm", "norm2"), ("ffn_up", "linear1"),
                     ("ffn_down", "linear2"), ("ffn_norm", "norm3")]:
            affine(p + a, q + b)
    affine("dec.output_norm", "transformer.decoder.norm")
    model.load_state_dict(sd, strict=True)
    # Training mode (dropout is 0) keeps PyTorch off its fused fast path, which
    # never asks the attention modules for their weights.
    return model.train()


def seq2seq_attention(model, source, target):
    """Per kind, [layers, heads, queries, keys] from nn.MultiheadAttention itself."""
    records = {"encoder": [], "decoder": [], "cross": []}

    def tap(mha, kind):
        forward = mha.forward

        def recording(query, key, value, **kw):
            kw["need_weights"] = True
            kw["average_attn_weights"] = False
            out, weights = forward(query, key, value, **kw)
            records[kind].append(weights[0].detach().numpy())  # batch 0: [heads, queries, keys]
            return out, weights
        mha.forward = recording

    for layer in model.transformer.encoder.layers:
        tap(layer.self_attn, "encoder")
    for layer in model.transformer.decoder.layers:
        tap(layer.self_attn, "decoder")
        tap(layer.multihead_attn, "cross")
    with torch.no_grad():
        model(torch.tensor([source]), torch.tensor([target]), torch.zeros(1, len(source), dtype=torch.bool))
    return {k: np.stack(v).astype(np.float32) for k, v in records.items()}


def llama_attention(path, tokens):
    """stories260K in float64: the softmax probabilities of every layer and head."""
    f = gguf_io.read_gguf(path)
    meta = f.metadata
    t = {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in f.tensors.items()}
    dim = int(meta["llama.embedding_length"])
    n_layers = int(meta["llama.block_count"])
    n_head = int(meta["llama.attention.head_count"])
    n_kv = int(meta.get("llama.attention.head_count_kv", n_head))
    eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
    base = float(meta.get("llama.rope.freq_base", 10000.0))
    hd = dim // n_head
    n_rot = int(meta.get("llama.rope.dimension_count", hd))
    T = len(tokens)

    def rmsnorm(x, g):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g

    # theta_i = base^(-2i / n_rot), divided by rope_freqs[i] where the file has
    # them (Llama 3.1); position p turns pair (x[2i], x[2i+1]) by p * theta_i.
    inv = base ** (-2.0 * torch.arange(n_rot // 2, dtype=torch.float64) / n_rot)
    if "rope_freqs.weight" in t:
        inv = inv / t["rope_freqs.weight"]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]

    def rope(x):  # (T, heads, hd)
        pairs = x[..., :n_rot].reshape(T, x.shape[1], n_rot // 2, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        turned = torch.stack((a * cos - b * sin, a * sin + b * cos), -1).reshape(T, x.shape[1], n_rot)
        return torch.cat((turned, x[..., n_rot:]), -1)

    x = t["token_embd.weight"][torch.tensor(tokens)]
    causal = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    probs = []
    for i in range(n_layers):
        p = f"blk.{i}."
        h = rmsnorm(x, t[p + "attn_norm.weight"])
        q = rope((h @ t[p + "attn_q.weight"].T).reshape(T, n_head, hd))
        k = rope((h @ t[p + "attn_k.weight"].T).reshape(T, n_kv, hd))
        v = (h @ t[p + "attn_v.weight"].T).reshape(T, n_kv, hd)
        k = k.repeat_interleave(n_head // n_kv, dim=1)
        v = v.repeat_interleave(n_head // n_kv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + causal
        a = torch.softmax(scores, -1)
        probs.append(a.numpy().astype(np.float32))
        x = x + torch.einsum("hqk,khd->qhd", a, v).reshape(T, dim) @ t[p + "attn_output.weight"].T
        h = rmsnorm(x, t[p + "ffn_norm.weight"])
        gate, up = h @ t[p + "ffn_gate.weight"].T, h @ t[p + "ffn_up.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ t[p + "ffn_down.weight"].T
    return np.stack(probs)


def gemma2_attention(path, tokens):
    """tests/fixtures/gemma/gemma2.gguf through make_gemma_fixtures.py's own float64
    forward (written from Hugging Face's Gemma2 eager attention: query scale,
    soft cap, sliding window on the even layers), its softmax outputs recorded."""
    import make_gemma_fixtures as gemma
    f = gguf_io.read_gguf(path)
    m = f.metadata
    cfg = dict(gemma2=True, layers=int(m["gemma2.block_count"]), dim=int(m["gemma2.embedding_length"]),
               heads=int(m["gemma2.attention.head_count"]), kv_heads=int(m["gemma2.attention.head_count_kv"]),
               head_dim=int(m["gemma2.attention.key_length"]), base=float(m["gemma2.rope.freq_base"]),
               window=int(m["gemma2.attention.sliding_window"]), attn_softcap=float(m["gemma2.attn_logit_softcapping"]),
               final_softcap=float(m["gemma2.final_logit_softcapping"]))
    # llama.cpp's rule for this size class (26 layers, "2B"): queries scaled by 1/sqrt(head size).
    cfg["query_pre_attn_scalar"] = cfg["head_dim"]
    W = {n: torch.tensor(np.asarray(w), dtype=torch.float64) for n, w in f.tensors.items()}
    recorded = []
    softmax = torch.Tensor.softmax

    def recording(self, *args, **kw):
        out = softmax(self, *args, **kw)
        recorded.append(out.detach().numpy().astype(np.float32))
        return out
    torch.Tensor.softmax = recording
    try:
        with torch.no_grad():
            gemma.forward(W, torch.tensor(tokens, dtype=torch.long), cfg)
    finally:
        torch.Tensor.softmax = softmax
    assert len(recorded) == cfg["layers"], len(recorded)
    return np.stack(recorded)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    args = ap.parse_args()
    out = []
    rng = np.random.default_rng(23)
    source = rng.integers(3, 29, 8).tolist() + [2]
    target = [1] + rng.integers(3, 29, 6).tolist()
    expected = gguf_io.read_gguf(os.path.join(FIXTURES, "transformer", "tiny_expected.gguf"))
    for name, norm_first in [("tiny_postln", False), ("tiny_preln", True)]:
        assert DIM == 24
        model = load_seq2seq(os.path.join(FIXTURES, "transformer", name + ".gguf"), norm_first)
        # The rebuilt model must give the logits its fixture recorded from the original.
        with torch.no_grad():
            src, tgt = (torch.from_numpy(expected.tensors[f"{name}.0.{k}"].astype(np.int64))[None] for k in ("source", "target"))
            logits = model(src, tgt, torch.zeros(1, src.shape[1], dtype=torch.bool))[0].numpy()
        assert np.abs(logits - expected.tensors[f"{name}.0.logits"]).max() < 1e-5, name
        maps = seq2seq_attention(model, source, target)
        out += [(f"{name}.source", np.array(source, dtype=np.int32)), (f"{name}.target", np.array(target, dtype=np.int32))]
        out += [(f"{name}.{kind}", maps[kind]) for kind in ("encoder", "decoder", "cross")]
    out += [("stories260K.tokens", np.array(STORY_TOKENS, dtype=np.int32)),
            ("stories260K.self", llama_attention(args.model, STORY_TOKENS))]
    # Grouped-query attention (4 query heads on 2 key/value heads) and rope_freqs factors.
    llama3_tokens = rng.integers(0, 29, 11).tolist()
    out += [("llama3.tokens", np.array(llama3_tokens, dtype=np.int32)),
            ("llama3.self", llama_attention(os.path.join(FIXTURES, "llama_family", "llama3.gguf"), llama3_tokens))]
    # Gemma 2: a query scale of its own, soft-capped scores, sliding windows.
    gemma_tokens = gguf_io.read_gguf(os.path.join(FIXTURES, "gemma", "gemma2_reference.gguf")).tensors["tokens"][:14]
    out += [("gemma2.tokens", np.array(gemma_tokens, dtype=np.int32)),
            ("gemma2.self", gemma2_attention(os.path.join(FIXTURES, "gemma", "gemma2.gguf"), gemma_tokens.tolist()))]
    os.makedirs(os.path.join(FIXTURES, "attention"), exist_ok=True)
    path = os.path.join(FIXTURES, "attention", "attention_expected.gguf")
    gguf_io.write_gguf(path, [("general.architecture", gguf_io.STRING, "fixture")], out)
    for name, a in out:
        print(name, a.shape)


if __name__ == "__main__":
    main()
