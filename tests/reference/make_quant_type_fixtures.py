#!/usr/bin/env python3
"""Writes tests/fixtures/quant_types.gguf: llama.cpp's own bytes and values for
every weight type kiln computes with, so that kiln's reference quantizers and
dequantizers are checked against llama.cpp and never against themselves.

    /usr/bin/python3 tests/reference/make_quant_type_fixtures.py \\
        --llama-cpp /path/to/llama.cpp --quantize /path/to/llama-quantize

--llama-cpp is a llama.cpp checkout (its gguf-py/ is imported: the numpy
dequantizers of gguf-py/gguf/quants.py and its GGUF writer); --quantize is a
llama-quantize binary built from it (the fixtures in the repository came from
llama.cpp c392e509). Nothing of llama.cpp is copied into kiln: this script only
runs it and stores what it printed.

The file holds:
  source            F32 [512, 24]: designed rows (below), the quantizers' input.
  quantized.<type>  <type> [512, 24]: llama-quantize's bytes for `source`. The
                    rows are planted as blk.0.ffn_down.weight of a one-layer
                    Llama (width 256, FFN 512) written by bench/make_llama_gguf.py,
                    quantized with `llama-quantize --pure` (every matrix of the
                    one type, no importance matrix) and read back.
  blocks.<type>     <type> [512, 2]: seeded random block bytes whose fp16 scale
                    fields are replaced by finite random halves, so every code
                    and scale bit pattern meets the dequantizer.
  dequant.<type>    F32 [512, 2]: gguf-py's dequantize() of blocks.<type>.
for <type> in q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs.

The source rows: 0-5 gaussian at scales 1, 0.02, 1e3, 1e-4, 3e-2 and 50;
6 uniform in [-1, 1]; 7 zeros; 8 constant 0.5; 9 gaussian with one outlier
(x40) per 32; 10 every other 16 zero; 11 positive only; 12 negative only;
13 tiny (1e-30 scale); 14 integers -8..7; 15 gaussian x 1e4; 16 sparse (one
in 37 nonzero); 17 blocks of 16 alternating 1e-3 and 1; 18 laplace; 19 student
t (3 dof); 20-23 gaussian with rows of mixed scale per 32.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "quant_types.gguf")
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402

# kiln name -> (llama-quantize ftype whose --pure output is all of this type, ggml type id)
TYPES = {
    "q4_0": ("Q4_0", 2), "q4_1": ("Q4_1", 3), "q5_0": ("Q5_0", 6), "q5_1": ("Q5_1", 7),
    "q8_0": ("Q8_0", 8), "q2_K": ("Q2_K", 10), "q3_K": ("Q3_K_M", 11), "q4_K": ("Q4_K_M", 12),
    "q5_K": ("Q5_K_M", 13), "q6_K": ("Q6_K", 14), "iq4_nl": ("IQ4_NL", 20), "iq4_xs": ("IQ4_XS", 23),
}
# Byte offsets of the fp16 scale fields inside one block of each type.
HALF_FIELDS = {
    "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
    "q2_K": [80, 82], "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208],
    "iq4_nl": [0], "iq4_xs": [0],
}
COLS, ROWS, RANDOM_ROWS = 512, 24, 2


def source_rows():
    rng = np.random.default_rng(20261124)
    g = lambda: rng.standard_normal(COLS)
    rows = [g() * 1, g() * 0.02, g() * 1e3, g() * 1e-4, g() * 3e-2, g() * 50,
            rng.uniform(-1, 1, COLS), np.zeros(COLS), np.full(COLS, 0.5)]
    r = g()
    r[::32] *= 40
    rows.append(r)
    r = g()
    r.reshape(-1, 16)[::2] = 0
    rows.append(r)
    rows += [np.abs(g()), -np.abs(g()), g() * 1e-30, rng.integers(-8, 8, COLS).astype(np.float64), g() * 1e4]
    r = np.zeros(COLS)
    r[::37] = g()[::37]
    rows.append(r)
    r = g()
    r.reshape(-1, 16)[::2] *= 1e-3
    rows += [r, rng.laplace(size=COLS), rng.standard_t(3, size=COLS)]
    for _ in range(4):
        rows.append(g() * np.repeat(10.0 ** rng.uniform(-3, 1, COLS // 32), 32))
    out = np.array(rows, dtype=np.float32)
    assert out.shape == (ROWS, COLS)
    return out


def quantize_with_llama(quantize, gguf, src, workdir):
    base = os.path.join(workdir, "base.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_llama_gguf.py"), "--layers", "1", "--dim", "256",
                    "--ffn", "512", "--heads", "2", "--vocab", "300", "--type", "f32", "--out", base],
                   check=True, stdout=subprocess.DEVNULL)
    info = gguf_io.read_gguf(base, load_tensors=False)
    t = info.tensor_infos["blk.0.ffn_down.weight"]
    assert t.dims == [COLS, 256] and t.ggml_type == 0
    with open(base, "r+b") as f:  # plant the designed rows as the first rows of ffn_down
        f.seek(info.data_offset + t.offset)
        f.write(src.astype("<f4").tobytes())
    out = {}
    for name, (ftype, type_id) in TYPES.items():
        dst = os.path.join(workdir, name + ".gguf")
        subprocess.run([quantize, "--pure", base, dst, ftype], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        reader = gguf.GGUFReader(dst)
        (tensor,) = [x for x in reader.tensors if x.name == "blk.0.ffn_down.weight"]
        assert int(tensor.tensor_type) == type_id, (name, tensor.tensor_type)
        data = np.asarray(tensor.data).reshape(256, -1)
        out[name] = np.ascontiguousarray(data[:ROWS]).view(np.uint8)
    return out


def random_blocks(name, type_id):
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)]
    n_blocks = RANDOM_ROWS * COLS // block
    rng = np.random.default_rng(type_id)
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in HALF_FIELDS[name]:
        halves = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(RANDOM_ROWS, -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp checkout (for gguf-py)")
    ap.add_argument("--quantize", required=True, help="llama-quantize binary")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    global gguf
    import gguf  # noqa: E402

    src = source_rows()
    with tempfile.TemporaryDirectory() as work:
        quantized = quantize_with_llama(args.quantize, gguf, src, work)
    w = gguf.GGUFWriter(args.out + ".tmp", "kiln-fixture")
    w.add_tensor("source", src)
    for name, (_, type_id) in TYPES.items():
        qtype = gguf.GGMLQuantizationType(type_id)
        w.add_tensor("quantized." + name, quantized[name], raw_shape=quantized[name].shape, raw_dtype=qtype)
        blocks = random_blocks(name, type_id)
        w.add_tensor("blocks." + name, blocks, raw_shape=blocks.shape, raw_dtype=qtype)
        w.add_tensor("dequant." + name, gguf.quants.dequantize(blocks, qtype).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(args.out + ".tmp", args.out)
    print("wrote", args.out, os.path.getsize(args.out), "bytes")


if __name__ == "__main__":
    main()
