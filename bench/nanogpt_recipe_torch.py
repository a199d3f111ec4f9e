#!/usr/bin/env python3
"""nanoGPT's CPU recipe for Tiny Shakespeare trained in PyTorch: a reference
distribution of the validation loss for kiln-train's quality target.

    /usr/bin/python3 bench/nanogpt_recipe_torch.py --seeds 1,2,3 -t 2
    /usr/bin/python3 bench/nanogpt_recipe_torch.py --score models/shakespeare-char.gguf

The model and the optimisation follow nanoGPT's published description of the
recipe (character GPT, 4 layers, 4 heads, width 128, context 64, batch 12, 2000
iterations, lr 1e-3 with 100 warmup steps and cosine decay to 1e-4, AdamW betas
0.9/0.99, weight decay 0.1 on every matrix including the embeddings, global-norm
clipping at 1.0, no dropout) and nanoGPT's model defaults for that recipe: no
biases in the linear layers or the LayerNorms, the exact (erf) GELU, the output
head tied to the token embedding, weights drawn from N(0, 0.02) with the two
residual projections of each block at 0.02 / sqrt(2 x layers). `--bias` and
`--gelu-tanh` give kiln-train's gpt2 layout instead (biases everywhere, tanh GELU).

Every run is scored three ways:
  nanogpt20  nanoGPT's own estimate: 20 random validation batches of 12 x 64;
  random100  kiln-train's --eval-batches 100: 100 random validation batches;
  split      the whole validation split (last 10% of the text) in non-overlapping
             windows of 64, every position scored: no sampling noise at all.
`--score FILE` reads a model kiln-train wrote (gpt2 GGUF, F32) and scores it the
same way, so kiln's runs and PyTorch's are compared on the same windows.

Threads: torch.set_num_threads(-t); OPENBLAS_NUM_THREADS/OMP_NUM_THREADS are set
before torch is imported. Debian's torch takes its BLAS from the libblas.so.3
alternative; with libopenblas0-pthread installed a run takes about 6 minutes on
2 threads of the 2-core build machine (about an hour with the reference BLAS).
"""
import argparse
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1337", help="comma-separated seeds, one run each")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--bias", action="store_true", help="biases in linear layers and LayerNorms (kiln's gpt2)")
    p.add_argument("--gelu-tanh", action="store_true", help="tanh GELU (kiln's gpt2) instead of exact")
    p.add_argument("--score", metavar="GGUF", help="only score a kiln-train model file")
    p.add_argument("--eval-seed", type=int, default=12345, help="seed of the random validation batches")
    p.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    return p.parse_args()


LAYERS, HEADS, WIDTH, CONTEXT, BATCH = 4, 4, 128, 64, 12
LR, MIN_LR, WARMUP, WEIGHT_DECAY, BETAS, CLIP = 1e-3, 1e-4, 100, 0.1, (0.9, 0.99), 1.0


def learning_rate(step, iters):
    """nanoGPT's schedule: linear warmup to LR, cosine decay to MIN_LR at `iters`."""
    if step < WARMUP:
        return LR * (step + 1) / (WARMUP + 1)
    if step > iters:
        return MIN_LR
    ratio = (step - WARMUP) / (iters - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


class CharGPT:
    """Parameters in a dict; names follow kiln's GGUF tensors so a kiln model loads directly."""

    def __init__(self, torch, vocab, bias, gelu_tanh, generator=None):
        self.torch, self.bias, self.gelu = torch, bias, "tanh" if gelu_tanh else "none"
        D, L = WIDTH, LAYERS
        self.P = {}

        def normal(name, shape, std=0.02):
            self.P[name] = torch.empty(*shape).normal_(0.0, std, generator=generator)

        def const(name, n, value):
            self.P[name] = torch.full((n,), value)

        normal("token_embd.weight", (vocab, D))
        normal("position_embd.weight", (CONTEXT, D))
        residual_std = 0.02 / math.sqrt(2 * L)
        for l in range(L):
            b = "blk.%d." % l
            normal(b + "attn_qkv.weight", (3 * D, D))
            normal(b + "attn_output.weight", (D, D), residual_std)
            normal(b + "ffn_up.weight", (4 * D, D))
            normal(b + "ffn_down.weight", (D, 4 * D), residual_std)
            const(b + "attn_norm.weight", D, 1.0)
            const(b + "ffn_norm.weight", D, 1.0)
            if bias:
                for name, n in (("attn_qkv", 3 * D), ("attn_output", D), ("ffn_up", 4 * D), ("ffn_down", D),
                                ("attn_norm", D), ("ffn_norm", D)):
                    const(b + name + ".bias", n, 0.0)
        const("output_norm.weight", D, 1.0)
        if bias:
            const("output_norm.bias", D, 0.0)
        for p in self.P.values():
            p.requires_grad_()

    def get(self, name):
        return self.P.get(name)

    def loss(self, x_ids, y_ids):
        torch = self.torch
        F = torch.nn.functional
        B, T = x_ids.shape
        D, H = WIDTH, HEADS
        hd = D // H
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        x = self.P["token_embd.weight"][x_ids] + self.P["position_embd.weight"][:T]
        for l in range(LAYERS):
            b = "blk.%d." % l
            h = F.layer_norm(x, (D,), self.get(b + "attn_norm.weight"), self.get(b + "attn_norm.bias"), 1e-5)
            q, k, v = F.linear(h, self.get(b + "attn_qkv.weight"), self.get(b + "attn_qkv.bias")).split(D, dim=2)
            q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, D)
            x = x + F.linear(y, self.get(b + "attn_output.weight"), self.get(b + "attn_output.bias"))
            h = F.layer_norm(x, (D,), self.get(b + "ffn_norm.weight"), self.get(b + "ffn_norm.bias"), 1e-5)
            u = F.gelu(F.linear(h, self.get(b + "ffn_up.weight"), self.get(b + "ffn_up.bias")), approximate=self.gelu)
            x = x + F.linear(u, self.get(b + "ffn_down.weight"), self.get(b + "ffn_down.bias"))
        x = F.layer_norm(x, (D,), self.get("output_norm.weight"), self.get("output_norm.bias"), 1e-5)
        logits = F.linear(x, self.P["token_embd.weight"])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y_ids.reshape(-1))


def scores(torch, model, val, eval_seed):
    """(nanogpt20, random100, split) validation losses of `model`."""
    out = []
    with torch.no_grad():
        g = torch.Generator().manual_seed(eval_seed)
        for batches in (20, 100):
            total = 0.0
            for _ in range(batches):
                starts = torch.randint(len(val) - CONTEXT, (BATCH,), generator=g)
                x = torch.stack([val[s:s + CONTEXT] for s in starts])
                y = torch.stack([val[s + 1:s + 1 + CONTEXT] for s in starts])
                total += model.loss(x, y).item()
            out.append(total / batches)
        n = (len(val) - 1) // CONTEXT
        x = val[:n * CONTEXT].view(n, CONTEXT)
        y = val[1:n * CONTEXT + 1].view(n, CONTEXT)
        total = 0.0
        for i in range(0, n, 64):
            total += model.loss(x[i:i + 64], y[i:i + 64]).item() * x[i:i + 64].numel()
        out.append(total / x.numel())
    return out


def train(torch, train_data, vocab, seed, a):
    torch.manual_seed(seed)
    model = CharGPT(torch, vocab, a.bias, a.gelu_tanh)
    decay = [p for p in model.P.values() if p.dim() >= 2]
    rest = [p for p in model.P.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=1e-8)
    params = list(model.P.values())
    for step in range(a.iters):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, a.iters)
        starts = torch.randint(len(train_data) - CONTEXT, (BATCH,))
        x = torch.stack([train_data[s:s + CONTEXT] for s in starts])
        y = torch.stack([train_data[s + 1:s + 1 + CONTEXT] for s in starts])
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
    return model, loss.item()


def main():
    a = parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text])
    n_train = int(0.9 * len(data))
    train_data, val = data[:n_train], data[n_train:]
    print("| run | nanogpt20 | random100 | split | last train batch | seconds |")
    print("|---|--:|--:|--:|--:|--:|")
    if a.score:
        from gguf_io import read_gguf
        g = read_gguf(a.score)
        if g.metadata.get("tokenizer.ggml.tokens") != chars:
            sys.exit("nanogpt_recipe_torch: %s: vocabulary differs from the text's characters" % a.score)
        model = CharGPT(torch, len(chars), bias="blk.0.attn_qkv.bias" in g.tensors, gelu_tanh=True)
        for name in list(model.P):
            if name not in g.tensors:
                sys.exit("nanogpt_recipe_torch: %s: tensor %s missing" % (a.score, name))
            model.P[name] = torch.from_numpy(g.tensors[name].astype("float32"))
        s = scores(torch, model, val, a.eval_seed)
        print("| %s | %.4f | %.4f | %.4f | | |" % (os.path.basename(a.score), *s), flush=True)
        return
    for seed in (int(s) for s in a.seeds.split(",")):
        t0 = time.time()
        model, last = train(torch, train_data, len(chars), seed, a)
        s = scores(torch, model, val, a.eval_seed)
        variant = ", ".join(v for v, on in (("biases", a.bias), ("tanh GELU", a.gelu_tanh)) if on)
        print("| torch seed %d%s | %.4f | %.4f | %.4f | %.4f | %.0f |" % (
            seed, " (%s)" % variant if variant else "", *s, last, time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
