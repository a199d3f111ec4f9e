#!/usr/bin/env python3
"""An encoder-decoder Transformer built on torch.nn.Transformer (library; torch 1.13, float32).

The shape of the common tutorials (and of docs/architectures.md, transformer), with these module names, so
`state_dict()` has exactly the keys kiln-convert reads:

    src_embed.weight (V, d)          tgt_embed.weight (V, d)       (nn.Embedding)
    transformer.encoder.layers.N.self_attn.in_proj_weight (3d, d), .in_proj_bias (3d)
    transformer.encoder.layers.N.self_attn.out_proj.weight (d, d), .bias (d)
    transformer.encoder.layers.N.linear1.weight (f, d), .bias     .linear2.weight (d, f), .bias
    transformer.encoder.layers.N.norm1.weight/.bias, .norm2.weight/.bias
    transformer.encoder.norm.weight/.bias
    transformer.decoder.layers.N.self_attn.*, .multihead_attn.* (as self_attn), linear1, linear2,
        norm1, norm2, norm3
    transformer.decoder.norm.weight/.bias
    generator.weight (V, d), generator.bias (V)                       (nn.Linear)

With shared=True the source and target embeddings are one module (both keys share a
storage) and the generator's weight is that embedding's (tied; its bias stays its own).

forward: x = embed(tokens) * sqrt(d) + PE[pos], PE(pos, 2i) = sin(pos / 10000^(2i/d)),
PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), computed in float64 and rounded to float32;
target mask causal (-inf above the diagonal); source padding masked as keys for encoder
self-attention and for cross-attention (src_key_padding_mask, memory_key_padding_mask);
no dropout (0.0). norm_first selects pre-LN; activation "relu" or "gelu" (exact erf).
"""
import math

import numpy as np
import torch
import torch.nn as nn


def sinusoidal_table(max_len, d_model):
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    i2 = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angle = pos / np.power(10000.0, i2 / d_model)
    pe = np.zeros((max_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return torch.from_numpy(pe.astype(np.float32))


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab_size, d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward,
                 norm_first, activation, layer_norm_eps, max_len, shared=False):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.src_embed = nn.Embedding(vocab_size, d_model)
        self.tgt_embed = self.src_embed if shared else nn.Embedding(vocab_size, d_model)
        if shared:
            # The paper's tied setup: embeddings of scale d^-0.5, so that embed * sqrt(d) is
            # of unit scale and the tied output layer starts with moderate logits.
            nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        self.transformer = nn.Transformer(
            d_model=d_model, nhead=nhead, num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward, dropout=0.0,
            activation=activation, layer_norm_eps=layer_norm_eps, batch_first=True, norm_first=norm_first)
        self.generator = nn.Linear(d_model, vocab_size)
        if shared:
            self.generator.weight = self.tgt_embed.weight
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.args = dict(d_model=d_model, nhead=nhead, num_encoder_layers=num_encoder_layers,
                         num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
                         norm_first=norm_first, activation=activation, layer_norm_eps=layer_norm_eps,
                         max_len=max_len)

    def embed(self, table, tokens):
        return table(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.size(1)]

    def encode(self, src, src_pad=None):
        """src (B, S) int64; src_pad (B, S) bool, True = padding."""
        return self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)

    def decode(self, memory, tgt, src_pad=None):
        """Logits (B, T, V) for every target position."""
        T = tgt.size(1)
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt), memory, tgt_mask=causal,
                                       memory_key_padding_mask=src_pad)
        return self.generator(out)

    def forward(self, src, tgt, src_pad=None):
        return self.decode(self.encode(src, src_pad), tgt, src_pad)


def encoder_decoder_step(model, source, bos):
    """A beam_search_reference step function: the source is encoded once; each hypothesis
    is [bos] + its tokens, decoded from scratch."""
    with torch.no_grad():
        memory = model.encode(torch.tensor([source], dtype=torch.long))

    @torch.no_grad()
    def step(hypotheses):
        rows = []
        for tokens in hypotheses:
            tgt = torch.tensor([[bos] + list(tokens)], dtype=torch.long)
            rows.append(model.decode(memory, tgt)[0, -1].numpy().astype("float32"))
        return rows

    return step
