#!/usr/bin/env python3
"""A GPT in nanoGPT's model.py structure (library; torch, float32, CPU).

Written here from the GPT-2 description, with nanoGPT's module names so that
`state_dict()` has exactly nanoGPT's keys:

    transformer.wte.weight (vocab, d)        transformer.wpe.weight (block_size, d)
    transformer.h.N.ln_1.weight/.bias        transformer.h.N.attn.c_attn.weight (3d, d) /.bias (3d)
    transformer.h.N.attn.c_proj.weight (d, d) /.bias
    transformer.h.N.ln_2.weight/.bias        transformer.h.N.mlp.c_fc.weight (4d, d) /.bias (4d)
    transformer.h.N.mlp.c_proj.weight (d, 4d) /.bias (d)
    transformer.ln_f.weight/.bias            lm_head.weight (vocab, d), tied to wte (same tensor)
    transformer.h.N.attn.bias (1, 1, block_size, block_size): the causal-mask buffer nanoGPT
        registers when torch has no scaled_dot_product_attention (torch < 2.0, as here)

bias=False drops every Linear and LayerNorm bias (nanoGPT's option). c_attn's output rows
are Q, then K, then V; heads are consecutive head_dim slices. GELU is the tanh form
(nanoGPT's new_gelu, HF's gelu_new). Dropout is omitted (inference). `forward` returns the
logits at every position (nanoGPT returns only the last one at inference).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GPTConfig:
    def __init__(self, block_size, vocab_size, n_layer, n_head, n_embd, bias=True, layer_norm_epsilon=1e-5):
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_embd = n_embd
        self.bias = bias
        self.layer_norm_epsilon = layer_norm_epsilon

    def model_args(self):
        """nanoGPT train.py's model_args dict (dropout included, as it saves it)."""
        return dict(n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd, block_size=self.block_size,
                    bias=self.bias, vocab_size=self.vocab_size, dropout=0.0)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (nanoGPT's)."""

    def __init__(self, ndim, bias, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.n_head = c.n_head
        self.n_embd = c.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(c.block_size, c.block_size)).view(
            1, 1, c.block_size, c.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)

    def forward(self, x):
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c.n_embd, c.bias, c.layer_norm_epsilon)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c.n_embd, c.bias, c.layer_norm_epsilon)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=LayerNorm(c.n_embd, c.bias, c.layer_norm_epsilon),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT does

    def forward(self, idx):
        """idx: (B, T) int64 -> logits (B, T, vocab) float32."""
        T = idx.size(1)
        if T > self.config.block_size:
            raise ValueError("sequence of %d is longer than block_size %d" % (T, self.config.block_size))
        pos = torch.arange(T, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def decoder_only_step(model, prompt):
    """A beam_search_reference step function: each hypothesis is prompt + its tokens,
    evaluated from scratch (the reference needs no cache)."""

    @torch.no_grad()
    def step(hypotheses):
        rows = []
        for tokens in hypotheses:
            idx = torch.tensor([list(prompt) + list(tokens)], dtype=torch.long)
            rows.append(model(idx)[0, -1].numpy().astype("float32"))
        return rows

    return step
