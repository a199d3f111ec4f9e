#!/usr/bin/env python3
"""Whole-model gradient fixtures for kiln-train's encoder-decoder (docs/architectures.md, transformer):
torch.nn.Transformer (float64, dropout 0, batch_first) with a shared, tied
embedding scaled by sqrt(d) plus sinusoidal positions, source key padding
(also masking the cross-attention memory), a causal decoder, and
cross-entropy ignoring labels of -1. Two models: pre-LN with exact GELU, and
post-LN (the paper's) with relu.

Parameters are renamed to kiln's GGUF names: in_proj rows [0, d) are q,
[d, 2d) k, [2d, 3d) v; out_proj is o; norm1/norm2(/norm3) are attn_norm,
(cross_attn_norm,) ffn_norm; linear1/linear2 are ffn_up/ffn_down.

Run: /usr/bin/python3 tests/reference/make_seq2seq_fixtures.py
Writes tests/fixtures/train/tiny_seq2seq_{preln_gelu,postln_relu}.gguf (deterministic).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402

V, CTX, D, H, FF, LE, LD, B, S, T = 9, 6, 8, 2, 12, 2, 2, 3, 5, 6
EPS = 1e-5


def positions(length):
    pe = np.zeros((length, D))
    for pos in range(length):
        for i in range(D // 2):
            angle = pos / (10000.0 ** (2 * i / D))
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return torch.tensor(pe)


def named_parameters(model, emb):
    out = [("token_embd.weight", emb)]

    def attention(prefix, mha):
        w, b = mha.in_proj_weight, mha.in_proj_bias
        for i, p in enumerate("qkv"):
            out.append((prefix + p + ".weight", w[i * D:(i + 1) * D]))
            out.append((prefix + p + ".bias", b[i * D:(i + 1) * D]))
        out.append((prefix + "o.weight", mha.out_proj.weight))
        out.append((prefix + "o.bias", mha.out_proj.bias))

    def norm(name, ln):
        out.append((name + ".weight", ln.weight))
        out.append((name + ".bias", ln.bias))

    def ffn(prefix, layer, ffn_norm):
        out.append((prefix + "ffn_up.weight", layer.linear1.weight))
        out.append((prefix + "ffn_up.bias", layer.linear1.bias))
        out.append((prefix + "ffn_down.weight", layer.linear2.weight))
        out.append((prefix + "ffn_down.bias", layer.linear2.bias))
        norm(prefix + "ffn_norm", ffn_norm)

    for n, layer in enumerate(model.encoder.layers):
        p = "enc.blk.%d." % n
        attention(p + "attn_", layer.self_attn)
        norm(p + "attn_norm", layer.norm1)
        ffn(p, layer, layer.norm2)
    norm("enc.output_norm", model.encoder.norm)
    for n, layer in enumerate(model.decoder.layers):
        p = "dec.blk.%d." % n
        attention(p + "attn_", layer.self_attn)
        norm(p + "attn_norm", layer.norm1)
        attention(p + "cross_attn_", layer.multihead_attn)
        norm(p + "cross_attn_norm", layer.norm2)
        ffn(p, layer, layer.norm3)
    norm("dec.output_norm", model.decoder.norm)
    return out


def make(name, norm_first, activation, seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = torch.nn.Transformer(d_model=D, nhead=H, num_encoder_layers=LE, num_decoder_layers=LD,
                                 dim_feedforward=FF, dropout=0.0, activation=activation, layer_norm_eps=EPS,
                                 batch_first=True, norm_first=norm_first).double()
    emb = torch.nn.Parameter(torch.randn(V, D, dtype=torch.float64) * 0.5)
    with torch.no_grad():  # norms and biases away from their 1/0 start, so their gradients are tested generally
        for n, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    # Start from float32-representable values: kiln holds float32.
    with torch.no_grad():
        for p in list(model.parameters()) + [emb]:
            p.copy_(p.float().double())

    src = rng.integers(3, V, size=(B, S))
    src_len = [5, 3, 4]
    for b in range(B):
        src[b, src_len[b]:] = 0
    dec_in = rng.integers(3, V, size=(B, T))
    labels = rng.integers(3, V, size=(B, T))
    labels[1, 4:] = -1
    labels[2, 5] = -1
    pad = torch.tensor([[t >= src_len[b] for t in range(S)] for b in range(B)])

    pe_s, pe_t = positions(S), positions(T)
    x = emb[torch.tensor(src)] * math.sqrt(D) + pe_s
    y = emb[torch.tensor(dec_in)] * math.sqrt(D) + pe_t
    causal = model.generate_square_subsequent_mask(T).double()
    out = model(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    logits = out @ emb.T
    loss = F.cross_entropy(logits.reshape(-1, V), torch.tensor(labels).reshape(-1), ignore_index=-1)
    loss.backward()

    meta = [
        ("general.architecture", gg.STRING, "transformer"),
        ("transformer.context_length", gg.UINT32, CTX), ("transformer.embedding_length", gg.UINT32, D),
        ("transformer.feed_forward_length", gg.UINT32, FF),
        ("transformer.encoder.block_count", gg.UINT32, LE), ("transformer.decoder.block_count", gg.UINT32, LD),
        ("transformer.attention.head_count", gg.UINT32, H),
        ("transformer.attention.layer_norm_epsilon", gg.FLOAT32, EPS),
        ("transformer.norm_first", gg.BOOL, norm_first),
        ("transformer.ffn_activation", gg.STRING, activation),
        ("test.vocab", gg.UINT32, V), ("test.batch", gg.UINT32, B),
        ("test.loss", gg.FLOAT64, float(loss)),
    ]
    mask = (~pad).numpy().astype(np.int32)
    tensors = [("source", src.reshape(-1).astype(np.int32)), ("source_mask", mask.reshape(-1)),
               ("decoder_input", dec_in.reshape(-1).astype(np.int32)), ("labels", labels.reshape(-1).astype(np.int32))]
    for (n, p), (n2, g) in zip(named_parameters(model, emb), named_parameters_grads(model, emb)):
        assert n == n2
        tensors.append((n, p.detach().numpy().astype(np.float32)))
        tensors.append(("grad." + n, g.detach().numpy().astype(np.float32)))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "train", name)
    gg.write_gguf(out, meta, tensors)
    print("wrote", os.path.normpath(out), "loss %.6f" % float(loss))


def named_parameters_grads(model, emb):
    out = [("token_embd.weight", emb.grad)]

    def attention(prefix, mha):
        w, b = mha.in_proj_weight.grad, mha.in_proj_bias.grad
        for i, p in enumerate("qkv"):
            out.append((prefix + p + ".weight", w[i * D:(i + 1) * D]))
            out.append((prefix + p + ".bias", b[i * D:(i + 1) * D]))
        out.append((prefix + "o.weight", mha.out_proj.weight.grad))
        out.append((prefix + "o.bias", mha.out_proj.bias.grad))

    def norm(name, ln):
        out.append((name + ".weight", ln.weight.grad))
        out.append((name + ".bias", ln.bias.grad))

    def ffn(prefix, layer, ffn_norm):
        out.append((prefix + "ffn_up.weight", layer.linear1.weight.grad))
        out.append((prefix + "ffn_up.bias", layer.linear1.bias.grad))
        out.append((prefix + "ffn_down.weight", layer.linear2.weight.grad))
        out.append((prefix + "ffn_down.bias", layer.linear2.bias.grad))
        norm(prefix + "ffn_norm", ffn_norm)

    for n, layer in enumerate(model.encoder.layers):
        p = "enc.blk.%d." % n
        attention(p + "attn_", layer.self_attn)
        norm(p + "attn_norm", layer.norm1)
        ffn(p, layer, layer.norm2)
    norm("enc.output_norm", model.encoder.norm)
    for n, layer in enumerate(model.decoder.layers):
        p = "dec.blk.%d." % n
        attention(p + "attn_", layer.self_attn)
        norm(p + "attn_norm", layer.norm1)
        attention(p + "cross_attn_", layer.multihead_attn)
        norm(p + "cross_attn_norm", layer.norm2)
        ffn(p, layer, layer.norm3)
    norm("dec.output_norm", model.decoder.norm)
    return out


if __name__ == "__main__":
    make("tiny_seq2seq_preln_gelu.gguf", True, "gelu", 7)
    make("tiny_seq2seq_postln_relu.gguf", False, "relu", 8)
