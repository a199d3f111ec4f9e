#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF v3 with seeded random weights, for benchmarks.

Default shape = TinyStories-110M (llama2.c's stories110M): width 768, 12 layers,
12 heads (12 KV heads), FFN 2048, vocabulary 32000, context 1024, rope dims 64
(= head_dim), rms eps 1e-5. llama.cpp's metadata keys and tensor names, plus the
tokenizer.ggml.* keys of /work/shared/models/vocab/ggml-vocab-llama-spm.gguf
(the 32000-token Llama SentencePiece vocabulary), so tools can run the file.

    /usr/bin/python3 bench/make_llama_gguf.py --type f32 --out /work/bench-models/llama110m-f32.gguf
    /usr/bin/python3 bench/make_llama_gguf.py --type q8_0 --out /work/bench-models/llama110m-q8_0.gguf
    /usr/bin/python3 bench/make_llama_gguf.py --shape tinyllama-1.1b --type f16 --out /work/bench-models/tinyllama-f16.gguf
    /usr/bin/python3 bench/make_llama_gguf.py --layers 2 --dim 128 --ffn 256 --heads 4 --vocab 512 --out small.gguf
    /usr/bin/python3 bench/make_llama_gguf.py --selftest     # quantizers vs tests/reference/make_quant_fixture.py

Weights: normal(0, 0.02) float32 from numpy's PCG64 seeded with --seed, one
tensor after the other in file order (so every --type gets the same values);
norm weights are 1.0. `--type` picks the type of the 2-D weights (token_embd,
output and the block matrices); norms stay F32. Q8_0 and Q4_0 follow ggml's
reference quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref) bit for bit:
vectorized here, checked by --selftest against make_quant_fixture.py's
element-by-element versions. With --vocab below 32000 the tokenizer arrays are
cut to the first --vocab entries (so token count = vocabulary; the byte tokens
<0x00>..<0xFF> are ids 3..258, keep --vocab >= 259); --no-tokenizer leaves it out.

The file is written to a temporary name beside --out, fsynced, then renamed.
"""
import argparse
import os
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.normpath(os.path.join(HERE, "..", "tests", "reference"))
sys.path.insert(0, REF_DIR)
import gguf_io  # noqa: E402  (reader only; its writer handles F32/I32 tensors only)

DEFAULT_VOCAB_GGUF = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "models", "vocab",
                                                   "ggml-vocab-llama-spm.gguf"))
ALIGN = 32
F32 = np.float32

# ggml tensor types and per-type storage: (ggml id, block size, bytes per block)
TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34)}
# llama.cpp's llama_ftype for general.file_type
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}


# ---------------------------------------------------------------- quantizers

def _fp16_bits(x):
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def _roundf(p):
    """C roundf (halves away from zero) of float32 values, exactly (via float64)."""
    p64 = np.asarray(p, dtype=F32).astype(np.float64)
    return np.copysign(np.floor(np.abs(p64) + 0.5), p64)


BLOCK_Q8_0 = np.dtype([("d", "<u2"), ("qs", "i1", (32,))])
BLOCK_Q4_0 = np.dtype([("d", "<u2"), ("qs", "u1", (16,))])
assert BLOCK_Q8_0.itemsize == 34 and BLOCK_Q4_0.itemsize == 18


def quantize_q8_0(x):
    """ggml quantize_row_q8_0_ref on a float32 array (size a multiple of 32) -> bytes.
    Per block: amax = max|x|; d = amax / 127; id = d ? 1/d : 0; store fp16(d);
    q = roundf(x * id) with the product rounded to float32."""
    b = np.asarray(x, dtype=F32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = (amax / F32(127)).astype(F32)
    inv = np.zeros_like(d)
    np.divide(F32(1), d, out=inv, where=d != 0)
    out = np.empty(b.shape[0], dtype=BLOCK_Q8_0)
    out["d"] = _fp16_bits(d)
    out["qs"] = _roundf(b * inv[:, None]).astype(np.int8)
    return out.tobytes()


def quantize_q4_0(x):
    """ggml quantize_row_q4_0_ref -> bytes. Per block: max = the first element of
    largest |x| (signed); d = max / -8; id = d ? 1/d : 0; store fp16(d);
    code = min(15, (int8)(x*id + 8.5f)) (product, then sum, each rounded to float32);
    byte j = code[j] | code[j+16] << 4."""
    b = np.asarray(x, dtype=F32).reshape(-1, 32)
    a = np.abs(b)
    idx = a.argmax(axis=1)                       # first index of the maximum
    rows = np.arange(b.shape[0])
    amax = a[rows, idx]
    vmax = np.where(amax > 0, b[rows, idx], F32(0)).astype(F32)   # ggml starts from max = 0.0f
    d = (vmax / F32(-8)).astype(F32)
    inv = np.zeros_like(d)
    np.divide(F32(1), d, out=inv, where=d != 0)
    shifted = (b * inv[:, None]).astype(F32) + F32(8.5)
    code = np.minimum(15, np.trunc(shifted.astype(np.float64))).astype(np.uint8)
    out = np.empty(b.shape[0], dtype=BLOCK_Q4_0)
    out["d"] = _fp16_bits(d)
    out["qs"] = code[:, :16] | (code[:, 16:] << 4)
    return out.tobytes()


def encode(arr, type_name):
    arr = np.ascontiguousarray(arr, dtype=F32)
    if type_name == "f32":
        return arr.astype("<f4").tobytes()
    if type_name == "f16":
        return _fp16_bits(arr).astype("<u2").tobytes()
    if type_name == "q8_0":
        return quantize_q8_0(arr)
    if type_name == "q4_0":
        return quantize_q4_0(arr)
    raise ValueError("unknown type %s" % type_name)


def nbytes(n_elements, type_name):
    _, blk, size = TYPES[type_name]
    assert n_elements % blk == 0
    return n_elements // blk * size


# ---------------------------------------------------------------- GGUF writing

def _pack_string(s):
    b = s.encode("utf-8", errors="surrogateescape") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


_SCALAR = {gguf_io.UINT8: "B", gguf_io.INT8: "b", gguf_io.UINT16: "H", gguf_io.INT16: "h",
           gguf_io.UINT32: "I", gguf_io.INT32: "i", gguf_io.FLOAT32: "f", gguf_io.BOOL: "?",
           gguf_io.UINT64: "Q", gguf_io.INT64: "q", gguf_io.FLOAT64: "d"}


def _pack_value(vtype, value):
    if isinstance(vtype, tuple):                      # (ARRAY, element type)
        etype = vtype[1]
        if etype in _SCALAR:
            return struct.pack("<IQ", etype, len(value)) + struct.pack("<%d%s" % (len(value), _SCALAR[etype]), *value)
        if etype == gguf_io.STRING:
            return struct.pack("<IQ", etype, len(value)) + b"".join(_pack_string(v) for v in value)
        raise ValueError("array of type %r not supported" % (etype,))
    if vtype in _SCALAR:
        return struct.pack("<" + _SCALAR[vtype], value)
    if vtype == gguf_io.STRING:
        return _pack_string(value)
    raise ValueError("value type %r not supported" % (vtype,))


def _pad(n):
    return (ALIGN - n % ALIGN) % ALIGN


def write_gguf_streaming(path, metadata, plan, make_bytes):
    """metadata: [(key, vtype, value)]; plan: [(name, numpy shape, type name)];
    make_bytes(i) -> the encoded data of plan[i], called in order (so only one
    tensor is in memory at a time). Writes path via a temp file + fsync + rename."""
    head = [b"GGUF", struct.pack("<IQQ", 3, len(plan), len(metadata))]
    for key, vtype, value in metadata:
        head.append(_pack_string(key))
        head.append(struct.pack("<I", gguf_io.ARRAY if isinstance(vtype, tuple) else vtype))
        head.append(_pack_value(vtype, value))
    offset = 0
    sizes = []
    for name, shape, tname in plan:
        dims = list(reversed(shape))                  # ggml order: ne0 = contiguous row length
        head.append(_pack_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims))
        head.append(struct.pack("<IQ", TYPES[tname][0], offset))
        size = nbytes(int(np.prod(shape)), tname)
        sizes.append(size)
        offset += size + _pad(size)
    header = b"".join(head)
    header += b"\0" * _pad(len(header))
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(header)
            for i, size in enumerate(sizes):
                data = make_bytes(i)
                if len(data) != size:
                    raise AssertionError("%s: %d bytes, expected %d" % (plan[i][0], len(data), size))
                f.write(data)
                f.write(b"\0" * _pad(size))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(header) + offset


# ---------------------------------------------------------------- the model

class Shape:
    def __init__(self, dim=768, layers=12, heads=12, kv_heads=None, ffn=2048, vocab=32000, ctx=1024,
                 eps=1e-5, rope_dims=None, freq_base=10000.0):
        self.dim, self.layers, self.heads, self.ffn, self.vocab, self.ctx = dim, layers, heads, ffn, vocab, ctx
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.eps, self.freq_base = eps, freq_base
        if dim % heads or heads % self.kv_heads:
            raise ValueError("dim %d / heads %d / kv heads %d do not divide" % (dim, heads, self.kv_heads))
        self.head_dim = dim // heads
        self.rope_dims = self.head_dim if rope_dims is None else rope_dims

    def plan(self, wtype, tied=False):
        """[(name, numpy shape (rows, row length), type)] in llama.cpp's file order.
        tied: no output.weight (llama.cpp then uses token_embd.weight for the logits)."""
        kv = self.kv_heads * self.head_dim
        p = [("token_embd.weight", (self.vocab, self.dim), wtype),
             ("output_norm.weight", (self.dim,), "f32")]
        if not tied:
            p.append(("output.weight", (self.vocab, self.dim), wtype))
        for i in range(self.layers):
            b = "blk.%d." % i
            p += [(b + "attn_norm.weight", (self.dim,), "f32"),
                  (b + "attn_q.weight", (self.dim, self.dim), wtype),
                  (b + "attn_k.weight", (kv, self.dim), wtype),
                  (b + "attn_v.weight", (kv, self.dim), wtype),
                  (b + "attn_output.weight", (self.dim, self.dim), wtype),
                  (b + "ffn_norm.weight", (self.dim,), "f32"),
                  (b + "ffn_gate.weight", (self.ffn, self.dim), wtype),
                  (b + "ffn_up.weight", (self.ffn, self.dim), wtype),
                  (b + "ffn_down.weight", (self.dim, self.ffn), wtype)]
        if wtype in ("q8_0", "q4_0"):
            for name, shape, t in p:
                if t == wtype and shape[-1] % 32:
                    raise ValueError("%s: row length %d is not a multiple of 32 (needed by %s)" % (name, shape[-1], wtype))
        return p


def tokenizer_metadata(vocab_path, vocab):
    src = gguf_io.read_gguf(vocab_path, load_tensors=False)
    n = len(src.metadata["tokenizer.ggml.tokens"])
    if vocab > n:
        raise ValueError("--vocab %d is larger than the tokenizer's %d tokens in %s (use --no-tokenizer)"
                         % (vocab, n, vocab_path))
    out = []
    for key, value in src.metadata.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        vtype = src.metadata_types[key]
        if isinstance(vtype, tuple):
            value = value[:vocab]
        elif key.endswith("_token_id") and value >= vocab:
            continue
        out.append((key, vtype, value))
    return out


def model_metadata(shape, wtype, name, tokenizer):
    U32, F, S = gguf_io.UINT32, gguf_io.FLOAT32, gguf_io.STRING
    m = [("general.architecture", S, "llama"),
         ("general.name", S, name),
         ("general.alignment", U32, ALIGN),
         ("general.file_type", U32, FILE_TYPE[wtype])]
    if wtype in ("q8_0", "q4_0"):
        m.append(("general.quantization_version", U32, 2))
    m += [("llama.context_length", U32, shape.ctx),
          ("llama.embedding_length", U32, shape.dim),
          ("llama.block_count", U32, shape.layers),
          ("llama.feed_forward_length", U32, shape.ffn),
          ("llama.rope.dimension_count", U32, shape.rope_dims),
          ("llama.rope.freq_base", F, shape.freq_base),
          ("llama.attention.head_count", U32, shape.heads),
          ("llama.attention.head_count_kv", U32, shape.kv_heads),
          ("llama.attention.layer_norm_rms_epsilon", F, shape.eps),
          ("llama.vocab_size", U32, shape.vocab)]
    return m + list(tokenizer)


def write_model(path, shape, wtype="f32", seed=1234, vocab_path=DEFAULT_VOCAB_GGUF, tokenizer=True,
                name=None, std=0.02, tied=False):
    """Writes the model; returns (bytes written, number of parameters)."""
    plan = shape.plan(wtype, tied)
    tok = tokenizer_metadata(vocab_path, shape.vocab) if tokenizer else []
    if name is None:
        name = "kiln-bench-llama-d%d-l%d-h%d-f%d-v%d" % (shape.dim, shape.layers, shape.heads, shape.ffn, shape.vocab)
    meta = model_metadata(shape, wtype, name, tok)
    rng = np.random.default_rng(seed)

    def make(i):
        tname, tshape, ttype = plan[i]
        if len(tshape) == 1:
            arr = np.ones(tshape, dtype=F32)
        else:
            arr = rng.standard_normal(tshape, dtype=F32)
            arr *= F32(std)
        return encode(arr, ttype)

    size = write_gguf_streaming(path, meta, plan, make)
    return size, sum(int(np.prod(s)) for _, s, _ in plan)


# ---------------------------------------------------------------- self-test

def selftest():
    """The vectorized quantizers against make_quant_fixture.py's per-element ones."""
    import make_quant_fixture as mq
    src = mq.make_source()
    rng = np.random.default_rng(7)
    extra = rng.standard_normal(32 * 64, dtype=F32) * F32(0.02)
    extra[:32] = 0                     # an all-zero block
    extra[32:64] = -0.0                # negative zeros
    extra[64] = -0.0                   # a -0 first element before larger values
    extra[96:128] = 0.5                # equal magnitudes: the first one wins
    extra[100] = -0.5
    for name, x in (("fixture source", src), ("random + edge blocks", extra)):
        want8, _ = mq.q8_0(x)
        want4, _ = mq.q4_0(x)
        got8, got4 = quantize_q8_0(x), quantize_q4_0(x)
        assert got8 == want8, "Q8_0 differs on %s" % name
        assert got4 == want4, "Q4_0 differs on %s" % name
        assert _fp16_bits(x).tobytes() == mq.fp16_bits(x).tobytes()
        print("selftest: %s (%d blocks): Q8_0, Q4_0, F16 bytes identical to make_quant_fixture.py"
              % (name, x.size // 32))


# --shape presets: llama2.c's stories110M (the default) and TinyLlama 1.1B
# (width 2048, 22 layers, 32 heads sharing 4 KV heads, FFN 5632, context 2048),
# the shape the K-quant benchmarks use: its weights do not fit in any cache.
SHAPES = {
    "stories110m": dict(dim=768, layers=12, heads=12, kv_heads=None, ffn=2048, vocab=32000, ctx=1024),
    "tinyllama-1.1b": dict(dim=2048, layers=22, heads=32, kv_heads=4, ffn=5632, vocab=32000, ctx=2048),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", help="output GGUF path")
    ap.add_argument("--type", default="f32", choices=sorted(TYPES), help="type of the 2-D weights (default f32)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="stories110m",
                    help="a preset for the sizes below (each size flag overrides it); default stories110m")
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--kv-heads", type=int, default=None, help="default: the preset's, else --heads")
    ap.add_argument("--ffn", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--ctx", type=int, default=None)
    ap.add_argument("--rope-dims", type=int, default=None, help="default: head_dim")
    ap.add_argument("--tokenizer-from", default=DEFAULT_VOCAB_GGUF, help="GGUF to copy tokenizer.ggml.* from")
    ap.add_argument("--no-tokenizer", action="store_true")
    ap.add_argument("--tied", action="store_true",
                    help="leave out output.weight (logits use token_embd.weight; 110M instead of 134M params)")
    ap.add_argument("--selftest", action="store_true", help="check the quantizers against make_quant_fixture.py")
    args = ap.parse_args(argv)
    preset = SHAPES[args.shape]
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.selftest:
        selftest()
        if not args.out:
            return 0
    if not args.out:
        ap.error("--out is required")
    try:
        shape = Shape(dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads, ffn=args.ffn,
                      vocab=args.vocab, ctx=args.ctx, rope_dims=args.rope_dims)
        t0 = time.perf_counter()
        size, params = write_model(args.out, shape, args.type, args.seed, args.tokenizer_from, not args.no_tokenizer,
                                   tied=args.tied)
        dt = time.perf_counter() - t0
    except (ValueError, OSError, gguf_io.GGUFError) as e:
        print("make_llama_gguf: error: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s: llama dim %d, layers %d, heads %d/%d, ffn %d, vocab %d, ctx %d; %s matrices; "
          "%.2f M params; %d bytes (%.2f MiB); %.1f s"
          % (args.out, shape.dim, shape.layers, shape.heads, shape.kv_heads, shape.ffn, shape.vocab, shape.ctx,
             args.type, params / 1e6, size, size / 2**20, dt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
