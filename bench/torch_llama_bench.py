#!/usr/bin/env python3
"""PyTorch float32 CPU baseline for kiln's Llama decode: pp and tg tokens/s, like llama-bench.

    /usr/bin/python3 bench/torch_llama_bench.py -m /work/bench-models/llama110m-f32.gguf -t 1
    /usr/bin/python3 bench/torch_llama_bench.py -m /work/bench-models/llama110m-f32.gguf -t 2 -p 128 -n 64 -r 3
    /usr/bin/python3 bench/torch_llama_bench.py --check            # correctness only (small models)
    /usr/bin/python3 bench/torch_llama_bench.py --check -m M.gguf  # ... also on M, then benchmark

Loads a llama.cpp-named GGUF (F32 tensors only) with tests/reference/gguf_io.py
into float32 tensors, and decodes with a KV cache: per layer a preallocated
(n_kv_heads, n_ctx, head_dim) K and V tensor, written at the current positions;
queries attend over positions 0..pos. The math is llama_reference.py's (RMSNorm,
adjacent-pair RoPE from float64 angle tables, GQA, softmax in float32, SwiGLU);
the only liberty is that Wq|Wk|Wv and Wgate|Wup are concatenated into one matrix
each at load time (one GEMM instead of three / two; --no-fuse turns it off).
Everything runs under torch.inference_mode() with torch.set_num_threads(-t).

--gemm picks how the weight matmuls run (comma list, "all", or "auto" = the first
available): xnnpack (weights prepacked once for XNNPACK's f32 GEMM,
torch.ops.prepacked.linear_clamp_*), mkldnn (weights as oneDNN tensors,
torch._C._nn.mkldnn_linear) or aten (plain F.linear). Debian's torch 1.13 links
the reference netlib BLAS (BLAS_INFO=generic, "MKL not found"), so aten runs at
~1 GFLOP/s and would be a straw man; xnnpack is the default. Attention uses the
same backend per KV head for prompts, and torch's vectorized multiply + sum for a
single query (one token).

Measurement (as llama-bench does it):
  pp<N>: the KV cache is cleared and a prompt of N random token ids is evaluated as
         one batch at positions 0..N-1; logits of the last position only (as
         llama.cpp computes by default). tokens/s = N / time.
  tg<N>: the cache is cleared, one token is decoded untimed (warm-up, position 0),
         then N tokens one at a time at positions 1..N, each with full-vocabulary
         logits. The tokens fed are pre-drawn random ids (llama-bench feeds random
         ids too), so no sampling or argmax sits inside the timed loop.
  One untimed pp and tg run first; then -r repetitions of each; mean +- sample stddev.
Token ids come from numpy's PCG64 seeded with --seed.

--check: builds two small models with bench/make_llama_gguf.py (MHA and GQA,
2 layers, dim 128) in a temp dir and checks that this script's cached decode
(token by token, and a batched prompt followed by single tokens) gives the
logits of llama_reference.py's full causal forward within 1e-4 (max abs).
"""
import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

# With --gemm xnnpack the GEMMs run on torch's pthreadpool while the OpenMP workers
# (torch's elementwise ops) spin-wait between parallel regions; with -t 2 on a 2-core
# machine the two pools then fight for the cores (measured here: tg 1.8 tok/s with
# active waiting, 7.0 with passive, on a loaded machine). libgomp reads this when
# torch loads it, so it is set before the import; an OMP_WAIT_POLICY in the
# environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "tests", "reference")))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
from llama_reference import LlamaConfig, LlamaReference  # noqa: E402

CHECK_TOL = 1e-4


def gemm_backends():
    """The weight-matmul implementations this torch build offers, best first."""
    out = []
    if hasattr(torch._C, "_is_xnnpack_enabled") and torch._C._is_xnnpack_enabled() \
            and hasattr(torch.ops.prepacked, "linear_clamp_prepack"):
        out.append("xnnpack")
    if torch.backends.mkldnn.is_available() and hasattr(torch._C._nn, "mkldnn_linear"):
        out.append("mkldnn")
    out.append("aten")
    return out


class Gemm:
    """y = x @ W.T for a fixed weight W (out, in), in one of three implementations:
    aten    F.linear (torch's BLAS; Debian's torch links the reference netlib BLAS)
    xnnpack W prepacked once with torch.ops.prepacked.linear_clamp_prepack (XNNPACK f32 GEMM)
    mkldnn  W converted once to an MKL-DNN (oneDNN) tensor, torch._C._nn.mkldnn_linear"""

    def __init__(self, w, backend):
        self.backend = backend
        self.out_features = w.shape[0]
        if backend == "xnnpack":
            self.w = torch.ops.prepacked.linear_clamp_prepack(w.contiguous(), None)
        elif backend == "mkldnn":
            self.w = w.contiguous().to_mkldnn()
        else:
            self.w = w.contiguous()

    def __call__(self, x):
        if self.backend == "xnnpack":
            return torch.ops.prepacked.linear_clamp_run(x.contiguous(), self.w)
        if self.backend == "mkldnn":
            return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), self.w, None).to_dense()
        return F.linear(x, self.w)


def matmul_nt(a, b, backend):
    """a (M, K) @ b (N, K).T for activations (attention), with the chosen backend."""
    if backend == "xnnpack":
        return torch.ops.prepacked.linear_clamp_run(
            a.contiguous(), torch.ops.prepacked.linear_clamp_prepack(b.contiguous(), None))
    if backend == "mkldnn":
        return torch._C._nn.mkldnn_linear(a.contiguous().to_mkldnn(), b.contiguous().to_mkldnn(), None).to_dense()
    return a @ b.transpose(0, 1)


class CachedLlama:
    """Llama decode with a KV cache, float32 on CPU."""

    def __init__(self, cfg, weights, n_ctx, fuse=True, backend="aten"):
        self.cfg = cfg
        self.n_ctx = n_ctx
        self.backend = backend
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
        self.tok_embd = t(weights["token_embd.weight"])
        self.vocab = self.tok_embd.shape[0]
        self.out_norm = t(weights["output_norm.weight"])
        self.output = Gemm(t(weights["output.weight"]) if "output.weight" in weights else self.tok_embd, backend)
        self.fuse = fuse
        c = cfg
        self.kv_dim = c.n_head_kv * c.head_dim
        self.layers = []
        for i in range(c.n_layers):
            p = "blk.%d." % i
            w = {k: t(weights[p + k + ".weight"]) for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            if fuse:
                w["attn_qkv"] = torch.cat((w.pop("attn_q"), w.pop("attn_k"), w.pop("attn_v")), dim=0)
                w["ffn_gate_up"] = torch.cat((w.pop("ffn_gate"), w.pop("ffn_up")), dim=0)
            self.layers.append({k: (v if k.endswith("norm") else Gemm(v, backend)) for k, v in w.items()})
        # rope tables as llama_reference.py: angles in float64, rounded to float32
        i = np.arange(c.n_rot // 2, dtype=np.float64)
        inv = c.freq_base ** (-2.0 * i / c.n_rot)
        ang = np.arange(n_ctx, dtype=np.float64)[:, None] * inv[None, :]
        self.cos = torch.from_numpy(np.cos(ang).astype(np.float32))
        self.sin = torch.from_numpy(np.sin(ang).astype(np.float32))
        self.k_cache = [torch.zeros(c.n_head_kv, n_ctx, c.head_dim) for _ in range(c.n_layers)]
        self.v_cache = [torch.zeros(c.n_head_kv, n_ctx, c.head_dim) for _ in range(c.n_layers)]
        self.scale = 1.0 / math.sqrt(c.head_dim)
        self.n_past = 0

    @classmethod
    def from_gguf(cls, path, n_ctx=None, fuse=True, backend="aten", gguf=None):
        f = gguf if gguf is not None else gguf_io.read_gguf(path)
        bad = [(n, i.ggml_type) for n, i in f.tensor_infos.items() if i.ggml_type != gguf_io.GGML_F32]
        if bad:
            raise ValueError("%s: only F32 tensors are supported; %d are not, e.g. %s has ggml type %d"
                             % (path, len(bad), bad[0][0], bad[0][1]))
        arch = f.metadata.get("general.architecture", "llama")
        if arch != "llama":
            raise ValueError("%s: general.architecture is %r, expected 'llama'" % (path, arch))
        cfg = LlamaConfig(f.metadata, arch)
        if n_ctx is None:
            n_ctx = int(f.metadata.get("llama.context_length", 2048))
        file_bytes = sum(a.nbytes for a in f.tensors.values())
        n_params = sum(a.size for a in f.tensors.values())
        m = cls(cfg, f.tensors, n_ctx, fuse, backend)
        m.file_bytes, m.n_params = file_bytes, n_params
        return m

    def clear(self):
        self.n_past = 0  # the stale cache rows are never read: attention stops at n_past

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.cfg.eps) * w

    def rope(self, x, cos, sin):
        """x: (T, heads, head_dim); rotate adjacent pairs of the first n_rot dims."""
        n_rot = self.cfg.n_rot
        T, H, D = x.shape
        xr = x[..., :n_rot].reshape(T, H, n_rot // 2, 2)
        x0, x1 = xr[..., 0], xr[..., 1]
        c, s = cos[:, None, :], sin[:, None, :]
        y = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(T, H, n_rot)
        return torch.cat((y, x[..., n_rot:]), dim=-1) if n_rot < D else y

    def attention(self, qg, K, V, mask, T):
        """qg (Hkv, group*T, D); K, V (Hkv, S, D) -> (Hkv, group*T, D)."""
        Hkv, GT, D = qg.shape
        S = K.shape[1]
        if self.backend != "aten" and T == 1:
            # one query per head: elementwise products and sums (torch's vectorized
            # kernels) beat a GEMM call per head at this size
            att = (qg[:, :, None, :] * K[:, None, :, :]).sum(-1) * self.scale     # (Hkv, group, S)
            att = torch.softmax(att, dim=-1)
            return (att[..., None] * V[:, None, :, :]).sum(-2)
        if self.backend == "aten":
            att = torch.matmul(qg, K.transpose(1, 2)) * self.scale             # (Hkv, group*T, S)
        else:
            att = torch.stack([matmul_nt(qg[h], K[h], self.backend) for h in range(Hkv)]) * self.scale
        if mask is not None:
            att = (att.reshape(Hkv, GT // T, T, S) + mask).reshape(Hkv, GT, S)
        att = torch.softmax(att, dim=-1)
        if self.backend == "aten":
            return torch.matmul(att, V)
        return torch.stack([matmul_nt(att[h], V[h].transpose(0, 1), self.backend) for h in range(Hkv)])

    def forward(self, ids, all_logits=False):
        """ids: LongTensor (T,) at positions n_past..n_past+T-1; appends to the cache.
        Returns logits (T, vocab) if all_logits else (1, vocab) for the last position."""
        c = self.cfg
        T = ids.shape[0]
        pos = self.n_past
        end = pos + T
        if end > self.n_ctx:
            raise ValueError("context full: %d + %d tokens > n_ctx %d" % (pos, T, self.n_ctx))
        H, Hkv, D = c.n_head, c.n_head_kv, c.head_dim
        group = H // Hkv
        cos, sin = self.cos[pos:end], self.sin[pos:end]
        mask = None
        if T > 1:  # query pos+i sees keys 0..pos+i
            mask = torch.full((T, end), float("-inf")).triu(pos + 1)
        x = self.tok_embd[ids]
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["attn_norm"])
            if self.fuse:
                q, k, v = L["attn_qkv"](h).split((c.dim, self.kv_dim, self.kv_dim), dim=-1)
            else:
                q, k, v = L["attn_q"](h), L["attn_k"](h), L["attn_v"](h)
            q = self.rope(q.reshape(T, H, D), cos, sin)
            k = self.rope(k.reshape(T, Hkv, D), cos, sin)
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc[:, pos:end] = k.transpose(0, 1)
            vc[:, pos:end] = v.reshape(T, Hkv, D).transpose(0, 1)
            # query head h uses KV head h // group: view the queries as (Hkv, group*T, D)
            qg = q.reshape(T, Hkv, group, D).permute(1, 2, 0, 3).reshape(Hkv, group * T, D)
            o = self.attention(qg, kc[:, :end], vc[:, :end], mask, T)
            o = o.reshape(Hkv, group, T, D).permute(2, 0, 1, 3).reshape(T, c.dim)
            x = x + L["attn_output"](o)
            h = self.rmsnorm(x, L["ffn_norm"])
            if self.fuse:
                g, u = L["ffn_gate_up"](h).split((c.hidden, c.hidden), dim=-1)
            else:
                g, u = L["ffn_gate"](h), L["ffn_up"](h)
            x = x + L["ffn_down"](F.silu(g) * u)
        self.n_past = end
        if not all_logits:
            x = x[-1:]
        return self.output(self.rmsnorm(x, self.out_norm))


# ---------------------------------------------------------------- correctness

def check_model(path, n_tokens=12, split=5, seed=1, fuse=True, backend="aten"):
    """Max |logit diff| of cached decode vs llama_reference's full forward; raises if > CHECK_TOL."""
    ref = LlamaReference.from_gguf(path)
    m = CachedLlama.from_gguf(path, n_ctx=n_tokens + 4, fuse=fuse, backend=backend)
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(0, ref.vocab, n_tokens)]
    with torch.inference_mode():
        want = ref.forward(ids).numpy()
        m.clear()
        one = torch.cat([m.forward(torch.tensor([i]), all_logits=True) for i in ids]).numpy()
        m.clear()
        first = m.forward(torch.tensor(ids[:split]), all_logits=True)
        rest = [m.forward(torch.tensor([i]), all_logits=True) for i in ids[split:]]
        mixed = torch.cat([first] + rest).numpy()
        # a second prompt batch on top of cached positions (mask offset)
        m.clear()
        a = m.forward(torch.tensor(ids[:split]), all_logits=True)
        b = m.forward(torch.tensor(ids[split:]), all_logits=True)
        two = torch.cat([a, b]).numpy()
    d1, d2, d3 = (float(np.abs(x - want).max()) for x in (one, mixed, two))
    ok = max(d1, d2, d3) <= CHECK_TOL
    print("check %s [%s%s]: %d tokens, max |logit diff| vs llama_reference: token-by-token %.2e, "
          "prompt %d + single tokens %.2e, two batches %.2e (max |logit| %.3g) -> %s"
          % (os.path.basename(path), backend, "" if fuse else ", unfused", n_tokens, d1, split, d2, d3,
             float(np.abs(want).max()),
             "ok" if ok else "FAIL (tolerance %g)" % CHECK_TOL), flush=True)
    if not ok:
        raise AssertionError("cached decode differs from llama_reference.py on %s" % path)


def run_checks(model, fuse, backends):
    """Small MHA and GQA models with every available backend; then `model` with `backends`."""
    import make_llama_gguf as mk
    with tempfile.TemporaryDirectory() as d:
        for name, kv in (("small-mha.gguf", None), ("small-gqa.gguf", 2)):
            p = os.path.join(d, name)
            mk.write_model(p, mk.Shape(dim=128, layers=2, heads=4, kv_heads=kv, ffn=256, vocab=512), "f32",
                           seed=42, tokenizer=False)
            for b in gemm_backends():
                check_model(p, fuse=fuse, backend=b)
    if model:
        for b in backends:
            check_model(model, n_tokens=8, split=3, fuse=fuse, backend=b)


# ---------------------------------------------------------------- benchmark

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def loadavg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "?"


def bench(m, n_prompt, n_gen, reps, seed):
    rng = np.random.default_rng(seed)
    vocab = m.vocab
    results = []
    with torch.inference_mode():
        if n_prompt > 0:
            prompt = torch.from_numpy(rng.integers(0, vocab, n_prompt).astype(np.int64))
            m.clear()
            m.forward(prompt)                      # untimed warm-up run
            times = []
            for r in range(reps):
                m.clear()
                t0 = time.perf_counter()
                logits = m.forward(prompt)
                times.append(time.perf_counter() - t0)
                assert torch.isfinite(logits).all()
                print("  pp%d rep %d: %.3f s" % (n_prompt, r + 1, times[-1]), file=sys.stderr, flush=True)
            results.append(("pp%d" % n_prompt, [n_prompt / t for t in times]))
        if n_gen > 0:
            toks = torch.from_numpy(rng.integers(0, vocab, n_gen + 1).astype(np.int64))
            steps = [toks[i:i + 1] for i in range(n_gen + 1)]
            m.clear()
            for s in steps[:2]:                    # untimed warm-up run
                m.forward(s)
            times = []
            last = []
            for r in range(reps):
                m.clear()
                m.forward(steps[0])                # 1-token warm-up, position 0
                t0 = time.perf_counter()
                for s in steps[1:]:
                    logits = m.forward(s)
                times.append(time.perf_counter() - t0)
                last.append(int(torch.argmax(logits)))
                print("  tg%d rep %d: %.3f s" % (n_gen, r + 1, times[-1]), file=sys.stderr, flush=True)
            assert len(set(last)) == 1, "repetitions disagree: %s" % last
            results.append(("tg%d" % n_gen, [n_gen / t for t in times]))
    return results


def fmt_rate(v):
    mean = statistics.mean(v)
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return "%.2f ± %.2f" % (mean, sd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("-m", "--model", help="F32 llama GGUF")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-fuse", action="store_true", help="keep Wq/Wk/Wv and Wgate/Wup as separate matmuls")
    ap.add_argument("--gemm", default="auto",
                    help="weight-matmul implementation(s), comma-separated: xnnpack, mkldnn, aten, all, or "
                         "auto (default: the first available of %s)" % ", ".join(gemm_backends()))
    ap.add_argument("--check", action="store_true", help="check cached decode against llama_reference.py first")
    args = ap.parse_args(argv)
    avail = gemm_backends()
    if args.gemm == "auto":
        backends = avail[:1]
    elif args.gemm == "all":
        backends = avail
    else:
        backends = args.gemm.split(",")
        for b in backends:
            if b not in avail:
                ap.error("--gemm %s is not available in this torch build (available: %s)" % (b, ", ".join(avail)))
    if not args.model and not args.check:
        ap.error("-m MODEL is required (or --check)")
    if args.threads < 1 or args.repetitions < 1 or args.n_prompt < 0 or args.n_gen < 0:
        ap.error("-t and -r must be >= 1, -p and -n >= 0")
    torch.set_num_threads(args.threads)
    fuse = not args.no_fuse
    try:
        if args.check:
            run_checks(args.model, fuse, backends)
            if not args.model:
                return 0
        load_before = loadavg()
        t0 = time.perf_counter()
        g = gguf_io.read_gguf(args.model)
        print("read %s in %.1f s" % (args.model, time.perf_counter() - t0), file=sys.stderr, flush=True)
        results = []
        for b in backends:
            m = CachedLlama.from_gguf(args.model, n_ctx=max(args.n_prompt, args.n_gen + 1), fuse=fuse,
                                      backend=b, gguf=g)
            print("gemm %s:" % b, file=sys.stderr, flush=True)
            results += [(b, test, rates) for test, rates in
                        bench(m, args.n_prompt, args.n_gen, args.repetitions, args.seed)]
            del m
    except (ValueError, OSError, KeyError, gguf_io.GGUFError) as e:
        print("torch_llama_bench: error: %s" % e, file=sys.stderr)
        return 1
    c = LlamaConfig(g.metadata, "llama")
    print("PyTorch %s (float32, CPU), threads %d (torch.get_num_threads() = %d), OMP_WAIT_POLICY=%s, "
          "CPU: %s, %d logical cores"
          % (torch.__version__, args.threads, torch.get_num_threads(), os.environ.get("OMP_WAIT_POLICY"),
             cpu_model(), os.cpu_count()))
    print("model %s: dim %d, layers %d, heads %d/%d, ffn %d, vocab %d; %s; load avg before %s, after %s"
          % (os.path.basename(args.model), c.dim, c.n_layers, c.n_head, c.n_head_kv, c.hidden,
             len(g.tensors["token_embd.weight"]),
             "fused qkv + gate|up" if fuse else "unfused", load_before, loadavg()))
    print()
    print("| model | size | params | backend | threads | test | t/s |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    mp = sum(a.size for a in g.tensors.values()) / 1e6
    name = "llama %s F32" % ("%.0fM" % mp if mp >= 10 else "%.2gM" % mp)
    file_bytes = sum(a.nbytes for a in g.tensors.values())
    n_params = sum(a.size for a in g.tensors.values())
    for b, test, rates in results:
        print("| %s | %.2f MiB | %.2f M | torch %s CPU %s | %d | %s | %s |"
              % (name, file_bytes / 2**20, n_params / 1e6, torch.__version__, b, args.threads, test, fmt_rate(rates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
