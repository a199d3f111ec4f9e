#!/usr/bin/env python3
"""Encoder-decoder GGUFs (general.architecture = "transformer") made from
torch.nn.Transformer models with seeded random weights, and the decoder logits
PyTorch's own nn.Transformer computes for them (float64), to test kiln's
transformer model directly, without the converter.

The model: shared vocabulary, source and target embeddings scaled by
sqrt(d_model) plus sinusoidal positions, nn.Transformer (batch_first, dropout
0), a Linear head with bias. Variants: post-LN (norm_first=False, the paper)
and pre-LN; both keep nn.Transformer's final encoder/decoder LayerNorms.

Writes tests/fixtures/transformer/tiny_{postln,preln}.gguf and
tiny_expected.gguf with, per model M and case c: `M.c.source` (I32),
`M.c.target` (I32, starting with BOS) and `M.c.logits` [len(target), vocab]:
decoder logits at every target position. Case 2 pairs a short source with
case 0's target, and `M.batch.logits` holds the logits of sources 0 and 2
run as one padded batch (key padding mask), which must equal the separate runs.
Run: /usr/bin/python3 tests/reference/make_transformer_model_fixtures.py
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gguf_io import BOOL, FLOAT32, STRING, UINT32, write_gguf  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "transformer")
VOCAB, DIM, HEADS, ENC, DEC, FFN, CTX, EPS = 29, 24, 3, 2, 2, 44, 32, 1e-5
BOS, EOS, PAD = 1, 2, 0


def sinusoids(n, d):
    pe = torch.zeros(n, d, dtype=torch.float64)
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe


class Seq2Seq(torch.nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        self.src_embed = torch.nn.Embedding(VOCAB, DIM)
        self.tgt_embed = torch.nn.Embedding(VOCAB, DIM)
        self.transformer = torch.nn.Transformer(DIM, HEADS, ENC, DEC, FFN, dropout=0.0, activation="relu",
                                                layer_norm_eps=EPS, batch_first=True, norm_first=norm_first)
        self.generator = torch.nn.Linear(DIM, VOCAB)

    def embed(self, table, ids):
        return table(ids) * math.sqrt(DIM) + sinusoids(ids.shape[1], DIM).to(table.weight.dtype)

    def forward(self, src, tgt, src_pad):
        n = tgt.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), dtype=torch.float64), diagonal=1)
        h = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt), tgt_mask=causal,
                             src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
        return self.generator(h)


def to_gguf(model, path, norm_first):
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    t = [("token_embd.weight", sd["src_embed.weight"]), ("dec.token_embd.weight", sd["tgt_embed.weight"]),
         ("output.weight", sd["generator.weight"]), ("output.bias", sd["generator.bias"])]

    def attn(prefix, torch_prefix):
        w, b = sd[torch_prefix + ".in_proj_weight"], sd[torch_prefix + ".in_proj_bias"]
        for j, part in enumerate("qkv"):
            t.append((f"{prefix}_{part}.weight", w[j * DIM:(j + 1) * DIM]))
            t.append((f"{prefix}_{part}.bias", b[j * DIM:(j + 1) * DIM]))
        t.append((f"{prefix}_o.weight", sd[torch_prefix + ".out_proj.weight"]))
        t.append((f"{prefix}_o.bias", sd[torch_prefix + ".out_proj.bias"]))

    def affine(name, torch_name):
        t.append((name + ".weight", sd[torch_name + ".weight"]))
        t.append((name + ".bias", sd[torch_name + ".bias"]))

    for i in range(ENC):
        p, q = f"enc.blk.{i}.", f"transformer.encoder.layers.{i}."
        attn(p + "attn", q + "self_attn")
        affine(p + "attn_norm", q + "norm1")
        affine(p + "ffn_up", q + "linear1")
        affine(p + "ffn_down", q + "linear2")
        affine(p + "ffn_norm", q + "norm2")
    affine("enc.output_norm", "transformer.encoder.norm")
    for i in range(DEC):
        p, q = f"dec.blk.{i}.", f"transformer.decoder.layers.{i}."
        attn(p + "attn", q + "self_attn")
        attn(p + "cross_attn", q + "multihead_attn")
        affine(p + "attn_norm", q + "norm1")
        affine(p + "cross_attn_norm", q + "norm2")
        affine(p + "ffn_up", q + "linear1")
        affine(p + "ffn_down", q + "linear2")
        affine(p + "ffn_norm", q + "norm3")
    affine("dec.output_norm", "transformer.decoder.norm")
    meta = [
        ("general.architecture", STRING, "transformer"),
        ("general.name", STRING, os.path.basename(path)),
        ("transformer.context_length", UINT32, CTX),
        ("transformer.embedding_length", UINT32, DIM),
        ("transformer.feed_forward_length", UINT32, FFN),
        ("transformer.encoder.block_count", UINT32, ENC),
        ("transformer.decoder.block_count", UINT32, DEC),
        ("transformer.attention.head_count", UINT32, HEADS),
        ("transformer.attention.layer_norm_epsilon", FLOAT32, EPS),
        ("transformer.norm_first", BOOL, norm_first),
        ("transformer.ffn_activation", STRING, "relu"),
        ("tokenizer.ggml.bos_token_id", UINT32, BOS),
        ("tokenizer.ggml.eos_token_id", UINT32, EOS),
        ("tokenizer.ggml.padding_token_id", UINT32, PAD),
    ]
    write_gguf(path, meta, [(n, np.ascontiguousarray(a, dtype=np.float32)) for n, a in t])


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(7)
    rng = np.random.default_rng(11)
    expected = []
    sources = [rng.integers(3, VOCAB, 9).tolist() + [EOS], rng.integers(3, VOCAB, 6).tolist() + [EOS]]
    sources.append(sources[0][:4] + [EOS])
    targets = [[BOS] + rng.integers(3, VOCAB, 7).tolist(), [BOS] + rng.integers(3, VOCAB, 12).tolist()]
    targets.append(targets[0])
    for name, norm_first in [("tiny_postln", False), ("tiny_preln", True)]:
        model = Seq2Seq(norm_first).double().eval()
        # Spread the weights wider than the default init so that the layers matter.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        to_gguf(model, os.path.join(OUT, name + ".gguf"), norm_first)
        with torch.no_grad():
            for c, (src, tgt) in enumerate(zip(sources, targets)):
                s, t = torch.tensor([src]), torch.tensor([tgt])
                logits = model(s, t, torch.zeros(1, len(src), dtype=torch.bool))[0]
                expected += [(f"{name}.{c}.source", np.array(src, dtype=np.int32)),
                             (f"{name}.{c}.target", np.array(tgt, dtype=np.int32)),
                             (f"{name}.{c}.logits", logits.numpy().astype(np.float32))]
            # Sources 0 and 2 padded into one batch, both decoding target 0.
            length = len(sources[0])
            padded = torch.tensor([sources[0], sources[2] + [PAD] * (length - len(sources[2]))])
            pad_mask = padded == PAD
            pad_mask[0, :] = False
            t = torch.tensor([targets[0], targets[0]])
            logits = model(padded, t, pad_mask)
            expected.append((f"{name}.batch.logits", logits.numpy().astype(np.float32)))
    write_gguf(os.path.join(OUT, "tiny_expected.gguf"), [("general.architecture", STRING, "fixture")], expected)


if __name__ == "__main__":
    main()
