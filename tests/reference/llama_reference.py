#!/usr/bin/env python3
"""An independent PyTorch reference of the Llama forward pass (float32, CPU).

Written from the model's definition, not translated from kiln's C++. Weights come
from a GGUF file with llama.cpp's tensor names and metadata keys (`llama` arch):

    x = token_embd[tokens]                                   (T, dim)
    per block:
        h = rmsnorm(x) * attn_norm;  q = h Wq^T, k = h Wk^T, v = h Wv^T
        RoPE on q and k: in each head, ADJACENT pairs (x[2i], x[2i+1]) for
            2i < n_rot are rotated by the angle pos * freq_base^(-2i / n_rot)
            (llama.cpp's mode 0 "normal" rope, = llama2.c's complex-pair rope)
        attention per query head h with KV head h // (n_head / n_head_kv):
            softmax(q k^T / sqrt(head_dim) + causal mask) v      (softmax in f32)
        x = x + concat(heads) Wo^T
        h = rmsnorm(x) * ffn_norm;   x = x + Wdown^T-applied( silu(h Wgate^T) * (h Wup^T) )
    logits = (rmsnorm(x) * output_norm) Woutput^T      (output tied to token_embd if absent)

    rmsnorm(x) = x * rsqrt(mean(x^2) + eps); nn.Linear convention y = x @ W.T, with
    W the numpy array as read from GGUF (shape (out, in)).

Use (the torch import only works with Debian's python):

    /usr/bin/python3 tests/reference/llama_reference.py [--model M.gguf] [--bin M.bin]
        runs the self-check: loads the llama2.c .bin of the same model, checks that
        every tensor equals the GGUF one, and compares the batched PyTorch forward
        with an independent numpy re-implementation of llama2.c's run.c (token by
        token with a KV cache, rope from the .bin's own freq_cis tables).

    from llama_reference import LlamaReference
    m = LlamaReference.from_gguf(path); m.forward([1, 403]) -> (2, vocab) logits
    m.generate_greedy(prompt, n) -> (ids, per-step logits)
"""
import argparse
import math
import os
import struct
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "models", "stories260K.gguf"))
DEFAULT_BIN = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "models", "stories260K.bin"))


class LlamaConfig:
    def __init__(self, meta, arch="llama"):
        def get(key, default=None):
            full = "%s.%s" % (arch, key)
            if full in meta:
                return meta[full]
            if default is None:
                raise KeyError("missing metadata key %s" % full)
            return default

        self.dim = int(get("embedding_length"))
        self.n_layers = int(get("block_count"))
        self.n_head = int(get("attention.head_count"))
        self.n_head_kv = int(get("attention.head_count_kv", self.n_head))
        self.hidden = int(get("feed_forward_length"))
        self.eps = float(get("attention.layer_norm_rms_epsilon"))
        self.freq_base = float(get("rope.freq_base", 10000.0))
        self.head_dim = self.dim // self.n_head
        self.n_rot = int(get("rope.dimension_count", self.head_dim))
        if self.n_head % self.n_head_kv:
            raise ValueError("head_count %d is not a multiple of head_count_kv %d" % (self.n_head, self.n_head_kv))
        if self.n_rot % 2 or self.n_rot > self.head_dim:
            raise ValueError("rope.dimension_count %d invalid for head_dim %d" % (self.n_rot, self.head_dim))

    def __repr__(self):
        return ("LlamaConfig(dim=%d, layers=%d, heads=%d, kv_heads=%d, hidden=%d, eps=%g, base=%g, n_rot=%d)"
                % (self.dim, self.n_layers, self.n_head, self.n_head_kv, self.hidden, self.eps, self.freq_base, self.n_rot))


class LlamaReference:
    def __init__(self, cfg, weights):
        """weights: dict of llama.cpp tensor name -> float32 numpy array (numpy order)."""
        self.cfg = cfg
        t = lambda name: torch.from_numpy(np.ascontiguousarray(weights[name], dtype=np.float32))  # noqa: E731
        self.tok_embd = t("token_embd.weight")
        self.vocab = self.tok_embd.shape[0]
        self.out_norm = t("output_norm.weight")
        self.output = t("output.weight") if "output.weight" in weights else self.tok_embd
        self.layers = []
        for i in range(cfg.n_layers):
            p = "blk.%d." % i
            self.layers.append({k: t(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        kv = cfg.n_head_kv * cfg.head_dim
        L0 = self.layers[0]
        assert L0["attn_q"].shape == (cfg.dim, cfg.dim), L0["attn_q"].shape
        assert L0["attn_k"].shape == (kv, cfg.dim) and L0["attn_v"].shape == (kv, cfg.dim)
        assert L0["ffn_gate"].shape == (cfg.hidden, cfg.dim) and L0["ffn_down"].shape == (cfg.dim, cfg.hidden)
        assert self.output.shape == (self.vocab, cfg.dim)

    @classmethod
    def from_gguf(cls, path):
        f = gguf_io.read_gguf(path)
        arch = f.metadata.get("general.architecture", "llama")
        return cls(LlamaConfig(f.metadata, arch), f.tensors)

    # --- pieces

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.cfg.eps) * w

    def rope_tables(self, n_pos):
        """cos/sin of shape (n_pos, n_rot/2); angles computed in float64, then rounded."""
        c = self.cfg
        i = np.arange(c.n_rot // 2, dtype=np.float64)
        inv = c.freq_base ** (-2.0 * i / c.n_rot)
        ang = np.arange(n_pos, dtype=np.float64)[:, None] * inv[None, :]
        return torch.from_numpy(np.cos(ang).astype(np.float32)), torch.from_numpy(np.sin(ang).astype(np.float32))

    def rope(self, x, cos, sin):
        """x: (T, n_heads, head_dim); rotates adjacent pairs of the first n_rot dims."""
        n_rot = self.cfg.n_rot
        T, H, D = x.shape
        xr = x[..., :n_rot].reshape(T, H, n_rot // 2, 2)
        x0, x1 = xr[..., 0], xr[..., 1]
        c = cos[:, None, :]
        s = sin[:, None, :]
        y = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(T, H, n_rot)
        return torch.cat((y, x[..., n_rot:]), dim=-1) if n_rot < D else y

    # --- the forward

    @torch.no_grad()
    def forward(self, tokens):
        """tokens: sequence of ids -> logits (len(tokens), vocab), float32, causal."""
        c = self.cfg
        ids = torch.tensor(list(tokens), dtype=torch.long)
        T = ids.shape[0]
        x = self.tok_embd[ids].clone()
        cos, sin = self.rope_tables(T)
        mask = torch.full((T, T), float("-inf"), dtype=torch.float32).triu(1)
        group = c.n_head // c.n_head_kv
        scale = 1.0 / math.sqrt(c.head_dim)
        for L in self.layers:
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ L["attn_q"].T).reshape(T, c.n_head, c.head_dim)
            k = (h @ L["attn_k"].T).reshape(T, c.n_head_kv, c.head_dim)
            v = (h @ L["attn_v"].T).reshape(T, c.n_head_kv, c.head_dim)
            q = self.rope(q, cos, sin)
            k = self.rope(k, cos, sin)
            # query head hq uses KV head hq // group
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (H, T, D)
            att = (q @ k.transpose(1, 2)) * scale + mask
            att = torch.softmax(att, dim=-1, dtype=torch.float32)
            o = (att @ v).transpose(0, 1).reshape(T, c.dim)
            x = x + o @ L["attn_output"].T
            h = self.rmsnorm(x, L["ffn_norm"])
            g = torch.nn.functional.silu(h @ L["ffn_gate"].T)
            u = h @ L["ffn_up"].T
            x = x + (g * u) @ L["ffn_down"].T
        x = self.rmsnorm(x, self.out_norm)
        return x @ self.output.T

    def generate_greedy(self, prompt, n_new):
        """Greedy decoding, recomputing the whole sequence each step (no cache).
        Returns (generated ids, list of the logits row used at each step). No EOS stop."""
        seq = list(prompt)
        out, step_logits = [], []
        for _ in range(n_new):
            row = self.forward(seq)[-1]
            nxt = int(torch.argmax(row))  # first maximal index on ties
            out.append(nxt)
            step_logits.append(row.numpy().copy())
            seq.append(nxt)
        return out, step_logits


# ---------------------------------------------------------------- llama2.c cross-check

def read_llama2c_bin(path):
    """llama2.c legacy checkpoint -> (config dict, tensors dict with llama2.c names)."""
    with open(path, "rb") as f:
        buf = f.read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack_from("<7i", buf, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // n_heads
    kvd = n_kv * hd
    shapes = [
        ("token_embedding", (vocab, dim)), ("rms_att", (n_layers, dim)),
        ("wq", (n_layers, dim, dim)), ("wk", (n_layers, kvd, dim)), ("wv", (n_layers, kvd, dim)),
        ("wo", (n_layers, dim, dim)), ("rms_ffn", (n_layers, dim)),
        ("w1", (n_layers, hidden, dim)), ("w2", (n_layers, dim, hidden)), ("w3", (n_layers, hidden, dim)),
        ("rms_final", (dim,)), ("freq_cis_real", (seq_len, hd // 2)), ("freq_cis_imag", (seq_len, hd // 2)),
    ]
    if not shared:
        shapes.append(("wcls", (vocab, dim)))
    off = 28
    t = {}
    for name, shape in shapes:
        n = int(np.prod(shape))
        t[name] = np.frombuffer(buf, dtype="<f4", count=n, offset=off).reshape(shape).copy()
        off += 4 * n
    if off != len(buf):
        raise ValueError("%s: %d bytes left over after the tensors" % (path, len(buf) - off))
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv,
               vocab=vocab, seq_len=seq_len, shared=shared)
    return cfg, t


def llama2c_forward_numpy(cfg, w, tokens, eps):
    """A second, independent forward: llama2.c run.c's algorithm in numpy float32,
    one token at a time with a KV cache; rope from the checkpoint's freq_cis tables."""
    dim, hd = cfg["dim"], cfg["dim"] // cfg["n_heads"]
    n_heads, n_kv = cfg["n_heads"], cfg["n_kv"]
    kv_mul = n_heads // n_kv
    f32 = np.float32
    wcls = w["wcls"] if not cfg["shared"] else w["token_embedding"]

    def rms(x, g):
        ss = f32(np.mean(x * x, dtype=f32) + f32(eps))
        return (x * f32(1.0 / np.sqrt(ss))) * g

    kc = np.zeros((cfg["n_layers"], len(tokens), n_kv * hd), f32)
    vc = np.zeros_like(kc)
    out = []
    for pos, tok in enumerate(tokens):
        x = w["token_embedding"][tok].astype(f32)
        fr, fi = w["freq_cis_real"][pos], w["freq_cis_imag"][pos]
        for l in range(cfg["n_layers"]):
            xb = rms(x, w["rms_att"][l])
            q = w["wq"][l] @ xb
            k = w["wk"][l] @ xb
            v = w["wv"][l] @ xb
            for vec in (q, k):  # complex multiply of (v[2i] + i v[2i+1]) by (fr + i fi)
                a = vec[0::2].reshape(-1, hd // 2).copy()
                b = vec[1::2].reshape(-1, hd // 2).copy()
                vec[0::2] = (a * fr - b * fi).reshape(-1)
                vec[1::2] = (a * fi + b * fr).reshape(-1)
            kc[l, pos], vc[l, pos] = k, v
            xb = np.zeros(dim, f32)
            for h in range(n_heads):
                qh = q[h * hd:(h + 1) * hd]
                kvh = h // kv_mul
                kk = kc[l, :pos + 1, kvh * hd:(kvh + 1) * hd]
                vv = vc[l, :pos + 1, kvh * hd:(kvh + 1) * hd]
                s = (kk @ qh) / f32(np.sqrt(hd))
                s = np.exp(s - s.max())
                s = s / s.sum()
                xb[h * hd:(h + 1) * hd] = s @ vv
            x = x + w["wo"][l] @ xb
            xb = rms(x, w["rms_ffn"][l])
            h1 = w["w1"][l] @ xb
            h3 = w["w3"][l] @ xb
            hb = h1 * (f32(1) / (f32(1) + np.exp(-h1))) * h3
            x = x + w["w2"][l] @ hb
        x = rms(x, w["rms_final"])
        out.append(wcls @ x)
    return np.stack(out)


def cross_check(model_path, bin_path, verbose=True):
    """Returns a list of report lines; raises AssertionError on a mismatch."""
    lines = []
    g = gguf_io.read_gguf(model_path)
    ref = LlamaReference(LlamaConfig(g.metadata), g.tensors)
    bcfg, bw = read_llama2c_bin(bin_path)
    c = ref.cfg
    assert (bcfg["dim"], bcfg["hidden"], bcfg["n_layers"], bcfg["n_heads"], bcfg["n_kv"], bcfg["vocab"]) == \
        (c.dim, c.hidden, c.n_layers, c.n_head, c.n_head_kv, ref.vocab), (bcfg, c)
    lines.append("llama2.c header: %s" % bcfg)
    pairs = [("token_embd.weight", bw["token_embedding"]), ("output_norm.weight", bw["rms_final"])]
    pairs.append(("output.weight", bw["wcls"] if not bcfg["shared"] else bw["token_embedding"]))
    m = {"attn_norm": "rms_att", "attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_output": "wo",
         "ffn_norm": "rms_ffn", "ffn_gate": "w1", "ffn_down": "w2", "ffn_up": "w3"}
    for l in range(c.n_layers):
        for gname, bname in m.items():
            pairs.append(("blk.%d.%s.weight" % (l, gname), bw[bname][l]))
    n_equal = 0
    for gname, arr in pairs:
        ga = g.tensors[gname]
        assert ga.shape == arr.shape, (gname, ga.shape, arr.shape)
        assert np.array_equal(ga, arr), "%s differs: max |diff| %g" % (gname, np.abs(ga - arr).max())
        n_equal += 1
    lines.append("tensors bit-identical between GGUF and llama2.c .bin: %d of %d (all GGUF tensors: %d)"
                 % (n_equal, len(pairs), len(g.tensors)))
    # rope: the .bin's own tables vs ours (angles pos * base^(-2i/hd))
    cos, sin = ref.rope_tables(bcfg["seq_len"])
    dc = np.abs(cos.numpy() - bw["freq_cis_real"]).max()
    ds = np.abs(sin.numpy() - bw["freq_cis_imag"]).max()
    lines.append("rope tables vs the .bin's freq_cis: max |diff| cos %.3g, sin %.3g" % (dc, ds))
    assert dc < 1e-4 and ds < 1e-4
    tokens = [1, 403, 407, 261, 378]
    # extend with a greedy continuation so positions up to 40 are checked
    gen, _ = ref.generate_greedy(tokens, 35)
    seq = tokens + gen
    a = ref.forward(seq).numpy()
    b = llama2c_forward_numpy(bcfg, bw, seq, c.eps)
    diff = np.abs(a - b).max()
    lines.append("batched torch forward vs token-by-token numpy llama2.c forward, %d positions: "
                 "max |logit diff| %.3g (max |logit| %.3g), argmax equal at %d/%d positions"
                 % (len(seq), diff, np.abs(a).max(), int((a.argmax(1) == b.argmax(1)).sum()), len(seq)))
    assert diff < 1e-3, diff
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--bin", default=DEFAULT_BIN)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    for line in cross_check(args.model, args.bin):
        print(line)
    print("cross-check passed in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
