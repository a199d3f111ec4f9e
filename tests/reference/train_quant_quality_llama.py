#!/usr/bin/env python3
"""Trains the small Llama that kiln's quantization-quality figures are measured on.

stories260K (width 64) has no row that is a whole 256-element K-quant block, so
llama-quantize falls back to other types on every matrix there. This model has
width 256, FFN 768, 4 layers, 4 heads of 64 with 2 KV heads (grouped-query
attention) and stories260K's 512-token SentencePiece vocabulary, so every matrix
row is whole K-quant super-blocks and each type is measured as itself. Both
kiln and llama.cpp run the file (llama architecture, llama.cpp's tensor names
and keys, tokenizer copied from stories260K.gguf).

    /usr/bin/python3 tests/reference/train_quant_quality_llama.py \\
        --tokenizer build/tools/kiln-tokenize --out /work/bench-models/quality-llama-f32.gguf

Data: Tiny Shakespeare (../shared/data/tinyshakespeare.txt), its first 90% for
training and the last 10% (written beside --out as <out>.valid.txt) for the
perplexity runs. Tokens come from --tokenizer (any program printing the ids of
`-m MODEL -f FILE --no-bos` on one line: kiln-tokenize or llama.cpp's
llama-tokenize --ids). The model is written as float32 (convert it to F16 with
kiln-convert or llama-quantize before quantizing). Deterministic for a given
torch build and thread count: torch.manual_seed(--seed), one thread.

Forward (what kiln and llama.cpp compute for `llama`): RMSNorm (eps 1e-5) before
attention and FFN, RoPE base 10000 on ADJACENT pairs (llama.cpp's normal mode,
so no permutation is needed when writing), causal softmax attention, SwiGLU FFN,
final RMSNorm, untied output matrix.
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402

SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared"))
DIM, LAYERS, HEADS, KV_HEADS, FFN, CTX = 256, 4, 4, 2, 768, 256
HEAD_DIM = DIM // HEADS
EPS, ROPE_BASE = 1e-5, 10000.0


def rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rope(x, cos, sin):
    # x: (B, H, T, hd); rotate adjacent pairs (x0, x1) by the position's angle.
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


class Model(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        p = lambda *shape, std=0.02: torch.nn.Parameter(torch.randn(*shape) * std)  # noqa: E731
        self.tok = p(vocab, DIM)
        self.blocks = torch.nn.ModuleList()
        for _ in range(LAYERS):
            b = torch.nn.Module()
            b.attn_norm = torch.nn.Parameter(torch.ones(DIM))
            b.q, b.k, b.v = p(DIM, DIM), p(KV_HEADS * HEAD_DIM, DIM), p(KV_HEADS * HEAD_DIM, DIM)
            b.o = p(DIM, DIM, std=0.02 / math.sqrt(2 * LAYERS))
            b.ffn_norm = torch.nn.Parameter(torch.ones(DIM))
            b.gate, b.up = p(FFN, DIM), p(FFN, DIM)
            b.down = p(DIM, FFN, std=0.02 / math.sqrt(2 * LAYERS))
            self.blocks.append(b)
        self.out_norm = torch.nn.Parameter(torch.ones(DIM))
        self.out = p(vocab, DIM)
        i = torch.arange(HEAD_DIM // 2, dtype=torch.float64)
        ang = torch.arange(CTX, dtype=torch.float64)[:, None] * ROPE_BASE ** (-2.0 * i / HEAD_DIM)[None, :]
        self.register_buffer("cos", torch.cos(ang).float(), persistent=False)
        self.register_buffer("sin", torch.sin(ang).float(), persistent=False)

    def forward(self, ids):
        B, T = ids.shape
        x = self.tok[ids]
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        for b in self.blocks:
            h = rmsnorm(x, b.attn_norm)
            q = (h @ b.q.T).view(B, T, HEADS, HEAD_DIM).transpose(1, 2)
            k = (h @ b.k.T).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = (h @ b.v.T).view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM) + mask, dim=-1)
            x = x + (att @ v).transpose(1, 2).reshape(B, T, DIM) @ b.o.T
            h = rmsnorm(x, b.ffn_norm)
            x = x + (torch.nn.functional.silu(h @ b.gate.T) * (h @ b.up.T)) @ b.down.T
        return rmsnorm(x, self.out_norm) @ self.out.T


def tokenize(tokenizer, vocab_gguf, path):
    out = subprocess.run([tokenizer, "-m", vocab_gguf, "-f", path, "--no-bos"], check=True, capture_output=True,
                         text=True).stdout
    return np.array([int(t) for t in out.split()], dtype=np.int64)


def write_gguf(path, model, vocab_meta):
    meta = [("general.architecture", gguf_io.STRING, "llama"),
            ("general.name", gguf_io.STRING, "kiln quant-quality llama 256x4"),
            ("general.file_type", gguf_io.UINT32, 0),
            ("llama.context_length", gguf_io.UINT32, CTX),
            ("llama.embedding_length", gguf_io.UINT32, DIM),
            ("llama.block_count", gguf_io.UINT32, LAYERS),
            ("llama.feed_forward_length", gguf_io.UINT32, FFN),
            ("llama.rope.dimension_count", gguf_io.UINT32, HEAD_DIM),
            ("llama.attention.head_count", gguf_io.UINT32, HEADS),
            ("llama.attention.head_count_kv", gguf_io.UINT32, KV_HEADS),
            ("llama.attention.layer_norm_rms_epsilon", gguf_io.FLOAT32, EPS),
            ("llama.rope.freq_base", gguf_io.FLOAT32, ROPE_BASE)] + vocab_meta
    f = lambda t: t.detach().float().numpy()  # noqa: E731
    tensors = [("token_embd.weight", f(model.tok)), ("output_norm.weight", f(model.out_norm)),
               ("output.weight", f(model.out))]
    for i, b in enumerate(model.blocks):
        p = "blk.%d." % i
        tensors += [(p + "attn_norm.weight", f(b.attn_norm)), (p + "attn_q.weight", f(b.q)),
                    (p + "attn_k.weight", f(b.k)), (p + "attn_v.weight", f(b.v)),
                    (p + "attn_output.weight", f(b.o)), (p + "ffn_norm.weight", f(b.ffn_norm)),
                    (p + "ffn_gate.weight", f(b.gate)), (p + "ffn_up.weight", f(b.up)),
                    (p + "ffn_down.weight", f(b.down))]
    gguf_io.write_gguf(path + ".tmp", meta, tensors)
    os.replace(path + ".tmp", path)


def vocab_metadata(vocab_gguf):
    src = gguf_io.read_gguf(vocab_gguf, load_tensors=False)
    out = []
    for key, value in src.metadata.items():
        if key.startswith("tokenizer."):
            out.append((key, src.metadata_types[key], value))
    return out, len(src.metadata["tokenizer.ggml.tokens"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="kiln-tokenize (or compatible) binary")
    ap.add_argument("--vocab", default=os.path.join(SHARED, "models", "stories260K.gguf"))
    ap.add_argument("--text", default=os.path.join(SHARED, "data", "tinyshakespeare.txt"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--window", type=int, default=128, help="tokens per training window (at most %d)" % CTX)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    with open(args.text, "rb") as fh:
        text = fh.read()
    cut = int(len(text) * 0.9)
    cut = text.index(b"\n\n", cut) + 2  # split at a speech boundary
    train_path, valid_path = args.out + ".train.txt", args.out + ".valid.txt"
    with open(train_path, "wb") as fh:
        fh.write(text[:cut])
    with open(valid_path, "wb") as fh:
        fh.write(text[cut:])
    vocab_meta, vocab = vocab_metadata(args.vocab)
    train = torch.from_numpy(tokenize(args.tokenizer, args.vocab, train_path))
    valid = torch.from_numpy(tokenize(args.tokenizer, args.vocab, valid_path))
    print("train %d tokens, valid %d tokens, vocab %d" % (len(train), len(valid), vocab), flush=True)

    model = Model(vocab)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)

    def batch(data):
        n = args.window
        ix = torch.randint(len(data) - n - 1, (args.batch,), generator=gen)
        x = torch.stack([data[i:i + n] for i in ix])
        y = torch.stack([data[i + 1:i + n + 1] for i in ix])
        return x, y

    t0 = time.time()
    warm = 50
    for step in range(args.steps + 1):
        lr = args.lr * min(1.0, (step + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(step, args.steps) / args.steps))
        for g in opt.param_groups:
            g["lr"] = max(lr, args.lr * 0.05)
        if step % 100 == 0 or step == args.steps:
            with torch.no_grad():
                x, y = batch(valid)
                vloss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
            print("step %d valid loss %.4f (%.0f s)" % (step, vloss, time.time() - t0), flush=True)
        if step == args.steps:
            break
        x, y = batch(train)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    write_gguf(args.out, model, vocab_meta)
    os.remove(train_path)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
