#!/usr/bin/env python3
"""Writes tests/fixtures/llama/stories260K_kl_q8_0.txt: what
`kiln-perplexity --kl-base BASE --kl-divergence -c 64` must report for the Q8_0
conversion of stories260K against the F32 model, on the first 3000 bytes of
Tiny Shakespeare, computed independently of kiln:

  tokens   spm_reference.encode (Python SentencePiece BPE), no BOS
  base     llama_reference.LlamaReference (PyTorch float32) on the F32 GGUF
  model    the same reference with every matrix as `kiln-convert --type q8_0`
           stores it (make_quant_fixture.q8_0, ggml's reference quantizer, for
           rows that are whole 32-blocks; float16 for the others, as the
           converter falls back), and the activations entering each Q8_0 matrix
           rounded to Q8_0 per row (what a Q8_0 x Q8_0 dot product consumes);
           the token embedding is looked up dequantized
  scores   per scored position (1..63 of every 64-token window), in float64:
           KL(base || model) = sum p_base (log p_base - log p_model),
           top-1 agreement = argmax equal; PPL of each; their ratio

How it was run:  /usr/bin/python3 tests/reference/make_kl_fixture.py
"""
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
import llama_reference  # noqa: E402
import make_quant_fixture  # noqa: E402
import spm_reference  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
TEXT = os.path.join(SHARED, "data", "tinyshakespeare.txt")
N_BYTES = 3000
CTX = 64
OUT = os.path.join(REPO, "tests", "fixtures", "llama", "stories260K_kl_q8_0.txt")
F32 = np.float32


def q8_0_rows(x):
    """Each row of x (float32, length a multiple of 32) quantized to Q8_0 and
    back, vectorized: d = amax / 127 in float32, codes = roundf(x * (1 / d)),
    value = code * fp16(d). Same arithmetic as make_quant_fixture.q8_0."""
    x = np.asarray(x, dtype=F32)
    b = x.reshape(-1, 32)
    amax = np.max(np.abs(b), axis=1).astype(F32)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, (F32(1) / d).astype(F32), F32(0)).astype(F32)
    codes = make_quant_fixture.roundf((b * inv[:, None]).astype(F32))
    d16 = d.astype(np.float16).astype(F32)
    return (codes.astype(F32) * d16[:, None]).astype(F32).reshape(x.shape)


class QuantT:
    """The transpose of a Q8_0 weight: h @ W.T quantizes h's rows first."""

    def __init__(self, w):
        self.w = w

    def __rmatmul__(self, h):
        hq = torch.from_numpy(q8_0_rows(h.numpy()))
        return hq @ self.w.T


class QuantWeight:
    def __init__(self, w):
        self.w = w
        self.shape = w.shape

    @property
    def T(self):
        return QuantT(self.w)


def as_stored(w):
    """(dequantized weight, whether it is Q8_0) as kiln-convert --type q8_0 stores a matrix."""
    w = np.asarray(w, dtype=F32)
    if w.shape[1] % 32 == 0:
        _, deq = make_quant_fixture.q8_0(w.reshape(-1))
        return deq.reshape(w.shape).astype(F32), True
    return w.astype(np.float16).astype(F32), False


def quantized_reference(path):
    f = gguf_io.read_gguf(path)
    weights = {}
    quantized = set()
    for name, t in f.tensors.items():
        t = np.asarray(t, dtype=F32)
        if t.ndim == 2 and t.shape[0] > 1:
            weights[name], q = as_stored(t)
            if q:
                quantized.add(name)
        else:
            weights[name] = t
    model = llama_reference.LlamaReference(llama_reference.LlamaConfig(f.metadata, "llama"), weights)
    for i, layer in enumerate(model.layers):
        for key in list(layer):
            if "blk.%d.%s.weight" % (i, key) in quantized:
                layer[key] = QuantWeight(layer[key])
    head = "output.weight" if "output.weight" in weights else "token_embd.weight"
    if head in quantized:
        model.output = QuantWeight(model.output)
    return model


def main():
    torch.set_num_threads(1)
    with open(TEXT, "rb") as f:
        text = f.read(N_BYTES)
    tokens = spm_reference.encode(spm_reference.Vocab(MODEL), text, add_bos=False)
    base = llama_reference.LlamaReference.from_gguf(MODEL)
    model = quantized_reference(MODEL)
    windows = len(tokens) // CTX
    base_nll = nll = kl_sum = kl_max = 0.0
    same = scored = 0
    for w in range(windows):
        window = tokens[w * CTX:(w + 1) * CTX]
        lp_base = torch.log_softmax(base.forward(window).double(), dim=-1)
        lp = torch.log_softmax(model.forward(window).double(), dim=-1)
        for i in range(CTX - 1):
            kl = float(torch.sum(torch.exp(lp_base[i]) * (lp_base[i] - lp[i])))
            kl_sum += kl
            kl_max = max(kl_max, kl)
            same += int(torch.argmax(lp_base[i]) == torch.argmax(lp[i]))
            base_nll -= lp_base[i, window[i + 1]].item()
            nll -= lp[i, window[i + 1]].item()
            scored += 1
    base_ppl, ppl = math.exp(base_nll / scored), math.exp(nll / scored)
    with open(OUT, "w") as f:
        f.write("# written by tests/reference/make_kl_fixture.py (PyTorch %s)\n" % torch.__version__)
        f.write("bytes %d\nctx %d\nwindows %d\nscored %d\n" % (N_BYTES, CTX, windows, scored))
        f.write("base_ppl %.10f\nppl %.10f\nppl_ratio %.10f\n" % (base_ppl, ppl, ppl / base_ppl))
        f.write("mean_kl %.10e\nmax_kl %.10e\nsame_top %d\n" % (kl_sum / scored, kl_max, same))
    print("windows %d, scored %d, base PPL %.6f, PPL %.6f, ratio %.6f, mean KL %.4e, max KL %.4e, top-1 %d/%d"
          % (windows, scored, base_ppl, ppl, ppl / base_ppl, kl_sum / scored, kl_max, same, scored))


if __name__ == "__main__":
    main()
