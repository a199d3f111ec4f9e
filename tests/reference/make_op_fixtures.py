#!/usr/bin/env python3
"""Writes tests/fixtures/ops/ops_reference.gguf: PyTorch reference inputs and
outputs for kiln's row kernels (engine/kernels/vector.h) and attention
(engine/kernels/attention.h), read by tests/test_kernels_vector.cpp and
tests/test_kernels_attention.cpp.

Run from anywhere with Debian's python3 and torch (1.13):

    /usr/bin/python3 tests/reference/make_op_fixtures.py

Deterministic: every input comes from a torch.Generator seeded with a fixed
number, the computations are single-threaded CPU torch ops, and the file is
written by gguf_io.write_gguf (a pure function of its inputs), so re-running the
script with the same torch build reproduces the committed bytes.

Every tensor is float32 (int32 for positions and masks), stored with ggml dims =
numpy shape reversed: an (rows, n) array is `rows` rows of n contiguous floats.
For case NAME the tensors are NAME.x (NAME.gate/NAME.up for swiglu), the
parameters NAME.weight / NAME.bias / NAME.pos / NAME.mask where the op has them,
and the expected output NAME.out. Scalar parameters are metadata keys
kiln.fixture.NAME.<param>.

How each expected output is made: torch ops evaluated in float64 on the
float32 inputs, rounded to float32 once, so the stored values are the exact
function to within a float32 rounding. Each is also evaluated by torch in
float32 and the two must agree (a check that the float64 formula is the one
torch implements); that agreement is only ~1e-7 relative for most ops but up to
~1e-4 absolute for layer_norm on a row whose mean is 1500 times its spread,
which is why the float32 results are not the ones stored.
  - activations, norms and softmax: F.silu, F.gelu with approximate='tanh',
    F.relu, F.softmax, F.layer_norm; rms_norm and swiglu written out in torch
    ops.
  - rope: from the definition in float64 (pairs (x[2i], x[2i+1]) of each head,
    i < n_rot/2, rotated by pos * base^(-2i/n_rot)), cross-checked against the
    complex-number form (adjacent pairs viewed as complex numbers, multiplied by
    exp(i theta), as llama2.c's apply_rotary_emb does), then rounded to float32.
    float64 because float32 angles at pos 4095 are off by ~2e-4 rad.
  - attention: explicit torch ops: scores = q . k^T * scale, with
    grouped-query heads (query head h reads kv head h // (n_head / n_kv_head));
    a key j is visible to a query at position p when j <= p (causal) and
    mask[j] != 0 (padding); invisible scores are masked_fill'ed with -inf, then
    softmax, then @ v. A query that sees no key at all has a row of -inf scores,
    for which torch's softmax gives NaN; the reference defines its output as
    zeros and replaces those rows explicitly (kiln's attend does the same).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402  (sibling module)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "ops", "ops_reference.gguf")
SEED = 20240611

tensors = []   # (name, numpy array) in file order
metadata = [("general.architecture", gguf_io.STRING, "kiln-fixture"),
            ("kiln.fixture.generator", gguf_io.STRING, "tests/reference/make_op_fixtures.py"),
            ("kiln.fixture.torch_version", gguf_io.STRING, torch.__version__)]


def put(name, t):
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    if a.dtype == np.float64:
        raise ValueError("%s: store float32, not float64" % name)
    if a.dtype == np.int64:
        a = a.astype(np.int32)
    tensors.append((name, np.ascontiguousarray(a)))


def meta_f32(key, value):
    metadata.append(("kiln.fixture." + key, gguf_io.FLOAT32, float(value)))


def meta_u32(key, value):
    metadata.append(("kiln.fixture." + key, gguf_io.UINT32, int(value)))


def close(name, got32, want64, rtol, atol):
    """torch's float32 result must agree with the float64 evaluation."""
    err = (got32.double() - want64).abs()
    bound = atol + rtol * want64.abs()
    if not bool((err <= bound).all()):
        i = int(torch.argmax(err - bound))
        raise AssertionError("%s: float32 vs float64 differ by %g at flat index %d" % (name, float(err.flatten()[i]), i))


def f32(value):
    """A parameter as the float32 the C++ kernel receives, so both sides use the same number."""
    return float(np.float32(value))


def randn(gen, *shape, std=1.0, mean=0.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * std + mean


def specials():
    # Large, tiny and edge-of-overflow inputs for the activations (exp overflows
    # float32 just above 88.72).
    return torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 5.0, -5.0, 10.0, -10.0, 20.0, -20.0,
                         88.0, -88.0, 88.8, -88.8, 100.0, -100.0, 1e4, -1e4], dtype=torch.float32)


# ------------------------------------------------------------------ activations

def activations(gen):
    x = torch.cat([randn(gen, 3 * 67 - 20, std=4.0), specials()]).reshape(3, 67)
    xd = x.double()

    put("silu.x", x)
    want = F.silu(xd)
    close("silu", F.silu(x), want, 1e-6, 1e-30)
    put("silu.out", want.float())

    put("gelu.x", x)
    want = F.gelu(xd, approximate="tanh")
    # torch's float32 tanh form carries an absolute error of ~|x| * 6e-8 where
    # 1 + tanh(u) cancels (x << 0), hence an atol scaled by max |x| = 1e4.
    close("gelu", F.gelu(x, approximate="tanh"), want, 1e-6, 1e-3)
    # ... and the float64 torch op is GPT-2's formula, written out:
    c = math.sqrt(2.0 / math.pi)
    formula = 0.5 * xd * (1.0 + torch.tanh(c * (xd + 0.044715 * xd ** 3)))
    assert float((want - formula).abs().max()) < 1e-12
    put("gelu.out", want.float())

    put("relu.x", x)
    put("relu.out", F.relu(x))  # exact in any precision

    gate = torch.cat([randn(gen, 2 * 67 - 20, std=3.0), specials()]).reshape(2, 67)
    up = randn(gen, 2, 67, std=2.0)
    want = F.silu(gate.double()) * up.double()
    close("swiglu", F.silu(gate) * up, want, 1e-6, 1e-30)
    put("swiglu.gate", gate)
    put("swiglu.up", up)
    put("swiglu.out", want.float())


# ------------------------------------------------------------------ norms

def rms_norm_torch(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def norms(gen):
    for name, eps, n in (("rms_norm_a", f32(1e-5), 67), ("rms_norm_b", f32(1e-6), 64)):
        x = randn(gen, 4, n, std=1.5)
        x[3] *= 1e-3  # a row whose mean square is comparable to eps: eps must really be added
        w = randn(gen, n, std=0.5, mean=1.0)
        want = rms_norm_torch(x.double(), w.double(), eps)
        close(name, rms_norm_torch(x, w, eps), want, 1e-5, 1e-7)
        put(name + ".x", x)
        put(name + ".weight", w)
        put(name + ".out", want.float())
        meta_f32(name + ".eps", eps)

    n, eps = 67, f32(1e-5)
    x = randn(gen, 4, n, std=2.0, mean=0.75)
    x[3] = x[3] * 1e-3 + 3.0  # offset row with a small spread: mean subtraction and eps both matter
    w = randn(gen, n, std=0.5, mean=1.0)
    b = randn(gen, n, std=0.5)
    want = F.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
    close("layer_norm", F.layer_norm(x, (n,), w, b, eps), want, 1e-5, 2e-4)
    put("layer_norm.x", x)
    put("layer_norm.weight", w)
    put("layer_norm.bias", b)
    put("layer_norm.out", want.float())
    meta_f32("layer_norm.eps", eps)


# ------------------------------------------------------------------ softmax

def softmax(gen):
    n = 37
    rows = [randn(gen, n, std=3.0) for _ in range(7)]
    rows[1][5], rows[1][20] = 1e4, -1e4                     # one huge logit wins outright
    rows[2][:4] = torch.tensor([88.0, 88.8, 87.0, 88.5])    # exp() of these overflows without max-subtraction
    rows[3][0], rows[3][9], rows[3][30] = 1e30, -1e30, 3e29  # 1e30-ish, finite
    rows[4][:] = -1e30                                       # all equal and hugely negative: uniform
    rows[5][:] = 1e4                                         # equal large logits, two levels
    rows[5][::3] = 1e4 - 1.0
    rows[6] = rows[6] * 1e-3 - 1e4                            # large offset, small spread
    x = torch.stack(rows)
    want = F.softmax(x.double(), dim=-1)
    close("softmax", F.softmax(x, dim=-1), want, 1e-5, 1e-9)
    assert bool(torch.isfinite(want).all())
    put("softmax.x", x)
    put("softmax.out", want.float())


# ------------------------------------------------------------------ rope

def rope_definition(x, pos, n_rot, base):
    """x: (n_tok, n_heads, head_dim) float64; loops straight from the definition."""
    out = x.clone()
    for t in range(x.shape[0]):
        for i in range(n_rot // 2):
            theta = float(pos[t]) * base ** (-2.0 * i / n_rot)
            c, s = math.cos(theta), math.sin(theta)
            x0 = x[t, :, 2 * i].clone()
            x1 = x[t, :, 2 * i + 1].clone()
            out[t, :, 2 * i] = x0 * c - x1 * s
            out[t, :, 2 * i + 1] = x0 * s + x1 * c
    return out


def rope_complex(x, pos, n_rot, base):
    """The same rotation as complex multiplication of adjacent pairs."""
    freqs = base ** (-torch.arange(0, n_rot, 2, dtype=torch.float64) / n_rot)      # (n_rot/2,)
    angles = torch.outer(pos.double(), freqs)                                     # (n_tok, n_rot/2)
    rot = torch.polar(torch.ones_like(angles), angles)[:, None, :]                 # broadcast over heads
    pairs = torch.view_as_complex(x[..., :n_rot].contiguous().reshape(*x.shape[:-1], n_rot // 2, 2))
    rotated = torch.view_as_real(pairs * rot).reshape(*x.shape[:-1], n_rot)
    return torch.cat([rotated, x[..., n_rot:]], dim=-1)


def rope(gen):
    cases = (("rope_a", 3, 16, 16, 10000.0, [0, 1, 7, 100, 4095]),
             ("rope_b", 5, 24, 16, 500000.0, [0, 3, 1000, 4096]))  # both bases exact in float32
    for name, n_heads, head_dim, n_rot, base, positions in cases:
        pos = torch.tensor(positions, dtype=torch.int32)
        x = randn(gen, len(positions), n_heads, head_dim)
        want = rope_definition(x.double(), pos, n_rot, base)
        other = rope_complex(x.double(), pos, n_rot, base)
        assert float((want - other).abs().max()) < 1e-12, name
        assert bool((want[..., n_rot:] == x.double()[..., n_rot:]).all()), name
        put(name + ".x", x)
        put(name + ".pos", pos)
        put(name + ".out", want.float())
        meta_u32(name + ".n_rot", n_rot)
        meta_f32(name + ".freq_base", base)


# ------------------------------------------------------------------ attention

def attention_reference(q, k, v, pos, mask, scale):
    """q (n_q, n_head, d), k/v (kv_len, n_kv, d), pos (n_q,), mask (kv_len,) -> (n_q, n_head, d)."""
    n_head, n_kv = q.shape[1], k.shape[1]
    group = n_head // n_kv
    kh = k.repeat_interleave(group, dim=1).transpose(0, 1)            # (n_head, kv_len, d)
    vh = v.repeat_interleave(group, dim=1).transpose(0, 1)
    qh = q.transpose(0, 1)                                            # (n_head, n_q, d)
    scores = torch.matmul(qh, kh.transpose(1, 2)) * scale             # (n_head, n_q, kv_len)
    j = torch.arange(k.shape[0])
    visible = (j[None, :] <= pos[:, None].long()) & (mask[None, :] != 0)   # (n_q, kv_len)
    scores = scores.masked_fill(~visible[None], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    # A query that sees nothing: softmax(-inf row) = NaN; defined as zeros here.
    p = torch.where(visible.any(-1)[None, :, None], p, torch.zeros_like(p))
    return torch.matmul(p, vh).transpose(0, 1).contiguous()          # (n_q, n_head, d)


def attention(gen):
    cases = (
        # prefill of 11 tokens, causal only
        ("attn_gqa4", 8, 4, 64, 11, list(range(11)), [1] * 11, f32(1.0 / math.sqrt(64))),
        # left padding (0, 1) and a hole at 5: queries at 0 and 1 see nothing,
        # the query at 2 sees one key; a non-default scale
        ("attn_gqa2", 8, 2, 12, 9, [0, 1, 2, 4, 8], [0, 0, 1, 1, 1, 0, 1, 1, 1], f32(0.3)),
    )
    for name, n_head, n_kv, d, kv_len, positions, mask_list, scale in cases:
        q = randn(gen, len(positions), n_head, d)
        k = randn(gen, kv_len, n_kv, d)
        v = randn(gen, kv_len, n_kv, d)
        pos = torch.tensor(positions, dtype=torch.int32)
        mask = torch.tensor(mask_list, dtype=torch.int32)
        want = attention_reference(q.double(), k.double(), v.double(), pos, mask, scale)
        close(name, attention_reference(q, k, v, pos, mask, scale), want, 1e-5, 1e-6)
        assert bool(torch.isfinite(want).all())
        put(name + ".q", q)
        put(name + ".k", k)
        put(name + ".v", v)
        put(name + ".pos", pos)
        put(name + ".mask", mask)
        put(name + ".out", want.float())
        meta_f32(name + ".scale", scale)


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    activations(gen)
    norms(gen)
    softmax(gen)
    rope(gen)
    attention(gen)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    gguf_io.write_gguf(tmp, metadata, tensors)
    os.replace(tmp, OUT)
    print("wrote %s (%d tensors, %d bytes)" % (os.path.normpath(OUT), len(tensors), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
