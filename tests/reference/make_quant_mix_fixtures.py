#!/usr/bin/env python3
"""Writes tests/fixtures/quant_mixes.json: the tensor types, general.file_type and
tensor bytes (SHA-256) that llama-quantize writes for each quantization mix, so that
kiln-convert --type <mix> is checked against llama.cpp and never against itself.

    /usr/bin/python3 tests/reference/make_quant_mix_fixtures.py \\
        --llama-cpp /path/to/llama.cpp --quantize /path/to/llama-quantize

(the fixture in the repository came from llama.cpp c392e509). Nothing of
llama.cpp is copied: this script runs llama-quantize (no importance matrix) and
stores what it wrote.

Inputs (F16 matrices, F32 norms):
  gqa4_8layers  8 layers, width 256, FFN 512, 4 heads sharing 1 KV head: every
                row a whole number of 256-blocks, attn_v at grouped-query 4.
  odd_rows_tied 4 layers, width 192, FFN 320, 4 heads, no output.weight (the
                token embedding takes output.weight's rule): rows that are not
                whole 256-blocks, so the fallback types are used.
  stories260K   /work/shared/models/stories260K.gguf made F16 by llama-quantize
                (rows of 64 and 172: llama-quantize refuses some mixes).
The two synthetic models hold values any program can recompute exactly, so the
test rebuilds them instead of storing them: tensor k (in file order), element i
(flat, row-major over ggml's dims), row r = i // dims[0]:
    h = mix32(i * 0x9E3779B1 + (k + 1) * 0x85EBCA77)      (mod 2^32)
    value = ((h >> 8) / 2^24 * 2 - 1) * 2^-(r % 5)        (exact in float32)
with mix32(x): x ^= x >> 15; x *= 0x2C1B3C6D; x ^= x >> 12; x *= 0x297A2D39;
x ^= x >> 15 (mod 2^32); 1-D tensors store it as F32, matrices as F16 (round to
nearest even).

The JSON holds, per input, its metadata facts, tensors (name, type, dims) and
the SHA-256 of each input tensor; per mix and input, llama-quantize's
general.file_type and each tensor's [type, SHA-256] (hashes cut to 16 hex digits), or "error" with the last
line llama-quantize printed when it refused.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "quant_mixes.json")
STORIES = "/work/shared/models/stories260K.gguf"
sys.path.insert(0, os.path.join(ROOT, "bench"))
import make_llama_gguf as mlg  # noqa: E402

MIXES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l",
         "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"]
SYNTHETIC = {
    "gqa4_8layers": (mlg.Shape(dim=256, layers=8, heads=4, kv_heads=1, ffn=512, vocab=64, ctx=128), False),
    "odd_rows_tied": (mlg.Shape(dim=192, layers=4, heads=4, kv_heads=4, ffn=320, vocab=64, ctx=128), True),
}
M32 = 0xFFFFFFFF


def mix32(x):
    x = x & M32
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & M32
    x ^= x >> 12
    x = (x * 0x297A2D39) & M32
    x ^= x >> 15
    return x


def values(k, numpy_shape):
    n = int(np.prod(numpy_shape))
    row_len = numpy_shape[-1]
    i = np.arange(n, dtype=np.uint64)
    h = mix32(i * np.uint64(0x9E3779B1) + np.uint64(((k + 1) * 0x85EBCA77) & M32))
    u = (h >> np.uint64(8)).astype(np.float32) / np.float32(2 ** 24)
    v = u * np.float32(2) - np.float32(1)
    scale = np.float32(2.0) ** -((i // np.uint64(row_len)) % np.uint64(5)).astype(np.float32)
    return (v * scale).astype(np.float32).reshape(numpy_shape)


def write_synthetic(path, shape, tied):
    plan = [(name, s, "f32" if len(s) == 1 else "f16") for name, s, _ in shape.plan("f16", tied)]
    meta = mlg.model_metadata(shape, "f16", "quant-mix-fixture", [])

    def make(k):
        _, s, t = plan[k]
        return mlg.encode(values(k, s), t)

    mlg.write_gguf_streaming(path, meta, plan, make)


def facts(reader):
    def u32(key, default=0):
        f = reader.fields.get(key)
        return int(f.parts[f.data[0]][0]) if f else default
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    head = u32(arch + ".attention.head_count")
    return {"architecture": arch, "block_count": u32(arch + ".block_count"), "head_count": head,
            "head_count_kv": u32(arch + ".attention.head_count_kv", head), "expert_count": u32(arch + ".expert_count")}


def tensor_table(reader):
    return {t.name: [t.tensor_type.name.lower().replace("_k", "_K"), hashlib.sha256(bytes(t.data)).hexdigest()[:16]]
            for t in reader.tensors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp checkout (for gguf-py)")
    ap.add_argument("--quantize", required=True, help="llama-quantize binary")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    import gguf

    out = {"llama_cpp": "c392e509", "inputs": {}, "mixes": {m: {} for m in MIXES}}
    with tempfile.TemporaryDirectory() as work:
        inputs = {}
        for name, (shape, tied) in SYNTHETIC.items():
            inputs[name] = os.path.join(work, name + ".gguf")
            write_synthetic(inputs[name], shape, tied)
        inputs["stories260K"] = os.path.join(work, "stories260K.gguf")
        subprocess.run([args.quantize, STORIES, inputs["stories260K"], "F16"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, path in inputs.items():
            r = gguf.GGUFReader(path)
            out["inputs"][name] = {
                "facts": facts(r),
                "tensors": [[t.name, t.tensor_type.name.lower(), [int(d) for d in t.shape]] for t in r.tensors],
                "sha256": {n: v[1] for n, v in tensor_table(r).items()},
            }
        for mix in MIXES:
            for name, path in inputs.items():
                dst = os.path.join(work, "%s.%s.gguf" % (name, mix))
                run = subprocess.run([args.quantize, path, dst, mix.upper(), "2"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                if run.returncode != 0:
                    lines = [x.strip() for x in run.stdout.splitlines() if x.strip()]
                    why = [x for x in lines if "Unsupported" in x or "error" in x.lower()]
                    out["mixes"][mix][name] = {"error": (why or lines or ["failed"])[-1]}
                    continue
                r = gguf.GGUFReader(dst)
                ft = r.fields["general.file_type"]
                out["mixes"][mix][name] = {"file_type": int(ft.parts[ft.data[0]][0]), "tensors": tensor_table(r)}
                os.remove(dst)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
