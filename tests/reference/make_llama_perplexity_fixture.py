#!/usr/bin/env python3
"""Records llama-perplexity's printed figures for stories260K into
tests/fixtures/llama/stories260K_llama_perplexity.txt (key value lines), the
independent reference for tests/test_perplexity_cli.cpp's [llama_ppl] tests.

Runs (llama.cpp c392e509, 1 thread, -c 128 -b 128, the first 20,000 bytes of
Tiny Shakespeare):
  1. llama-perplexity on the F32 model: the running [i] estimates and
     "Final estimate: PPL = x +/- y";
  2. the same on the Q8_0 model that kiln-convert --type q8_0 writes;
  3. --kl-divergence-base with the F32 model, then --kl-divergence with the
     Q8_0 model: the statistics block;
  4. for each mix of MIXES, llama-perplexity on llama-quantize's file of the
     F32 model (ppl_<mix>): the test scores kiln-convert's file of the same
     mix, so both the quantizers and the kernels meet llama.cpp's numbers.

usage: [KILN_SHARED_DIR=...] make_llama_perplexity_fixture.py KILN_CONVERT [LLAMA_BIN_DIR]
(the shared folder defaults to the one beside the checkout)
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
TEXT = os.path.join(SHARED, "data", "tinyshakespeare.txt")
OUT = os.path.join(ROOT, "tests", "fixtures", "llama", "stories260K_llama_perplexity.txt")
BYTES, CTX = 20000, 128
# stories260K's rows (64, 172) are no whole K-quant blocks: these mixes fall
# back to Q5_0/Q5_1/Q8_0/F16 on the way, so they exercise those types too.
MIXES = ["q4_k_m", "q5_k_m", "q6_k", "q3_k_m", "q2_k"]


def run(args):
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return done.stdout, done.stderr


def final_estimate(err):
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", err)
    return m.group(1), m.group(2)


def main():
    if not os.path.exists(SHARED):
        sys.exit("cannot find the shared folder at " + SHARED)
    convert = sys.argv[1]
    bin_dir = sys.argv[2] if len(sys.argv) > 2 else "/work/anchors/llama.cpp/build/bin"
    ppl_tool = os.path.join(bin_dir, "llama-perplexity")
    common = ["-c", str(CTX), "-b", str(CTX), "-t", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(TEXT, "rb") as f, open(text, "wb") as g:
            g.write(f.read(BYTES))
        q8_0 = os.path.join(tmp, "q8_0.gguf")
        run([convert, MODEL, "-o", q8_0, "--type", "q8_0"])
        out, err = run([ppl_tool, "-m", MODEL, "-f", text] + common)
        chunks = re.findall(r"\[(\d+)\]([0-9.]+),", out)
        f32 = final_estimate(err)
        _, err = run([ppl_tool, "-m", q8_0, "-f", text] + common)
        q8 = final_estimate(err)
        base = os.path.join(tmp, "base.kld")
        run([ppl_tool, "-m", MODEL, "-f", text] + common + ["--kl-divergence-base", base])
        out, _ = run([ppl_tool, "-m", q8_0, "-f", text] + common + ["--kl-divergence-base", base, "--kl-divergence"])
        mixes = {}
        for mix in MIXES:
            path = os.path.join(tmp, mix + ".gguf")
            run([os.path.join(bin_dir, "llama-quantize"), MODEL, path, mix.upper(), "1"])
            _, err = run([ppl_tool, "-m", path, "-f", text] + common)
            mixes[mix] = final_estimate(err)
    stats = []
    for line in out.splitlines():
        m = re.match(r"^(.+?)\s*:\s*(-?[0-9.]+)\s*(?:±\s*(-?[0-9.]+))?\s*%?$", line.strip())
        if not m or line.startswith("chunk"):
            continue
        label = m.group(1).strip().replace("/", " over ").replace(")-", ") minus ").replace("Δp", "dp")
        key = re.sub(r"[^A-Za-z0-9.]+", "_", label).strip("_")
        stats.append((key, m.group(2)))
        if m.group(3):
            stats.append((key + "_unc", m.group(3)))
    with open(OUT, "w") as f:
        f.write("# written by tests/reference/make_llama_perplexity_fixture.py (llama.cpp c392e509 llama-perplexity)\n")
        f.write(f"bytes {BYTES}\nctx {CTX}\nwindows {len(chunks)}\n")
        f.write(f"chunk1 {chunks[0][1]}\nchunk_last {chunks[-1][1]}\n")
        f.write(f"ppl_f32 {f32[0]}\nppl_f32_unc {f32[1]}\nppl_q8_0 {q8[0]}\nppl_q8_0_unc {q8[1]}\n")
        for mix, (ppl, unc) in mixes.items():
            f.write(f"ppl_{mix} {ppl}\nppl_{mix}_unc {unc}\n")
        f.write("# --kl-divergence of the Q8_0 model against the F32 base (Δp and Same top p in %)\n")
        for key, value in stats:
            f.write(f"{key} {value}\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
