#!/usr/bin/env python3
"""Training speed: kiln-train against PyTorch on the same model, batch and threads.

    /usr/bin/python3 bench/train_speed.py                 # nanoGPT's CPU recipe shape, 2 threads
    /usr/bin/python3 bench/train_speed.py -t 1 --steps 30

The model is the character GPT of kiln-train's default recipe (4 layers, 4 heads,
width 128, context 64, batch 12, no biases, tied head, vocabulary of Tiny
Shakespeare) in both. A training step is the same work in both: forward,
backward, global-norm clipping (1.0), AdamW (betas 0.9/0.99, weight decay 0.1
on matrices). PyTorch runs the same math as tests/reference/make_train_fixtures.py
(nn.functional ops, float32) with torch.set_num_threads(-t) and
OPENBLAS_NUM_THREADS/OMP_NUM_THREADS = -t set before torch is imported. Debian's
torch calls whatever libblas.so.3 the alternatives system points at: install
libopenblas0-pthread for a fair comparison (the reference BLAS is ~9x slower);
the BLAS library torch loaded is printed under the table.

kiln's tokens/s comes from kiln-train's CSV log (per-step time, evaluation and
checkpoints excluded); PyTorch's from timing the same steps. Both skip --warmup
steps and report the mean over --steps steps (tokens per step = batch x context).
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    p.add_argument("--kiln-train", default=os.path.join(ROOT, "build", "tools", "kiln-train"))
    return p.parse_args()


def kiln_speed(a):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.gguf")
        total = a.warmup + a.steps
        cmd = [a.kiln_train, "-f", a.text, "-o", out, "--layers", str(a.layers), "--heads", str(a.heads),
               "--width", str(a.width), "--context", str(a.context), "--batch", str(a.batch), "--iters", str(total),
               "--warmup", "0", "--eval-interval", str(total), "--eval-batches", "1", "-t", str(a.threads)]
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
        with open(os.path.join(tmp, "m.csv")) as f:
            rows = list(csv.DictReader(f))
        speeds = [float(r["tokens_per_s"]) for r in rows[a.warmup:]]
        # Mean time per step -> tokens/s (the harmonic mean of the per-step speeds).
        return len(speeds) / sum(1.0 / s for s in speeds)


def torch_speed(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    V, T, D, H, L, B = len(chars), a.context, a.width, a.heads, a.layers, a.batch
    hd = D // H

    def normal(*shape, std=0.02):
        return (torch.randn(*shape) * std).requires_grad_()

    P = {"wte": normal(V, D), "wpe": normal(T, D), "lnf_w": torch.ones(D, requires_grad=True),
         "lnf_b": torch.zeros(D, requires_grad=True)}
    decay = []
    for l in range(L):
        for n, shape in (("qkv", (3 * D, D)), ("o", (D, D)), ("up", (4 * D, D)), ("down", (D, 4 * D))):
            P["%d.%s" % (l, n)] = normal(*shape)
            decay.append(P["%d.%s" % (l, n)])
        for n in ("ln1", "ln2"):
            P["%d.%s_w" % (l, n)] = torch.ones(D, requires_grad=True)
            P["%d.%s_b" % (l, n)] = torch.zeros(D, requires_grad=True)
    rest = [p for p in P.values() if all(p is not d for d in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def loss_of(x_ids, y_ids):
        x = P["wte"][x_ids] + P["wpe"]
        for l in range(L):
            h = F.layer_norm(x, (D,), P["%d.ln1_w" % l], P["%d.ln1_b" % l])
            q, k, v = F.linear(h, P["%d.qkv" % l]).split(D, dim=2)
            q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, D)
            x = x + F.linear(y, P["%d.o" % l])
            h = F.layer_norm(x, (D,), P["%d.ln2_w" % l], P["%d.ln2_b" % l])
            x = x + F.linear(F.gelu(F.linear(h, P["%d.up" % l]), approximate="tanh"), P["%d.down" % l])
        x = F.layer_norm(x, (D,), P["lnf_w"], P["lnf_b"])
        return F.cross_entropy(F.linear(x, P["wte"]).view(-1, V), y_ids.view(-1))

    rng = np.random.default_rng(1337)
    n_train = int(0.9 * len(data))
    times = []
    for step in range(a.warmup + a.steps):
        starts = rng.integers(0, n_train - T - 1, size=B)
        x_ids = torch.stack([data[s:s + T] for s in starts])
        y_ids = torch.stack([data[s + 1:s + T + 1] for s in starts])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x_ids, y_ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    timed = times[a.warmup:]
    return B * T * len(timed) / sum(timed), torch.__version__, torch.__config__.show()


def main():
    a = parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    if not os.path.exists(a.kiln_train):
        sys.exit("train_speed: %s not found (build it: cmake --build build --target kiln-train)" % a.kiln_train)
    kiln = kiln_speed(a)
    torch_tps, version, config = torch_speed(a)
    blas = [item.strip() for item in config.replace("\n", ",").split(",") if "BLAS_INFO" in item]
    # BLAS_INFO=generic only says torch calls libblas.so.3; which library that is
    # (Debian's alternatives: the reference BLAS or OpenBLAS) decides its speed.
    blas += sorted({os.path.realpath(line.split()[-1]) for line in open("/proc/self/maps")
                    if "libblas" in line or "libopenblas" in line})
    print("| model | threads | batch x context | kiln-train tokens/s | PyTorch %s tokens/s | kiln / PyTorch |" % version)
    print("|---|---|---|---|---|---|")
    print("| %dL %dH d%d | %d | %d x %d | %.0f | %.0f | %.2fx |" % (
        a.layers, a.heads, a.width, a.threads, a.batch, a.context, kiln, torch_tps, kiln / torch_tps))
    print("PyTorch build: %s" % ("; ".join(blas) if blas else "(no BLAS line in torch.__config__.show())"))


if __name__ == "__main__":
    main()
