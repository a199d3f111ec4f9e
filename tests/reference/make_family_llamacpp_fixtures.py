#!/usr/bin/env python3
"""The PyTorch-checked family fixtures (make_llama_family_fixtures.py,
make_gemma_fixtures.py, make_phi3_fixtures.py) given a real vocabulary, and
llama.cpp's figures on them: the independent reference of
tests/test_family_llamacpp.cpp.

Each model keeps its fixture's weights and hyper-parameters; its token
embedding (and untied head) gets fresh random rows for the 512 tokens of
stories260K's SentencePiece vocabulary, whose tokenizer.* keys it takes.
Then, with llama.cpp c392e509 (1 thread):
  ppl     llama-perplexity -c 64 -b 64 on the first 10,000 bytes of Tiny
          Shakespeare: "Final estimate: PPL = x +/- y"
  greedy  llama-simple -n 24 "Once upon a time": the continuation's bytes (hex);
          llama-simple's context is prompt + 24 - 1 tokens, padded to 32 (simple_ctx)

usage: [KILN_SHARED_DIR=...] /usr/bin/python3 make_family_llamacpp_fixtures.py [LLAMA_BIN_DIR]
Writes tests/fixtures/llamacpp_family/<name>.gguf and expected.txt.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gguf_io as gg  # noqa: E402

SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
VOCAB = os.path.join(SHARED, "models", "stories260K.gguf")
TEXT = os.path.join(SHARED, "data", "tinyshakespeare.txt")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIXTURES, "llamacpp_family")
BYTES, CTX, N_PREDICT, PROMPT = 10000, 64, 24, "Once upon a time"
# llama_linear is left out: llama.cpp c392e509 sizes llama's q bias by the width,
# not by heads x attention.key_length, and refuses that file.
MODELS = ["llama_family/qwen2", "llama_family/llama3", "llama_family/llama_yarn",
          "gemma/gemma2", "gemma/gemma", "phi3/phi3", "phi3/phi3_longrope"]


def with_vocabulary(src, dst, vocab, rng):
    model = gg.read_gguf(src)
    n_vocab = len(vocab.metadata["tokenizer.ggml.tokens"])
    arch = model.metadata["general.architecture"]
    meta = []
    for key, value in model.metadata.items():
        if key == arch + ".vocab_size":
            value = n_vocab
        if key == "general.name":
            # llama.cpp sets Phi-3's own special-token attributes when the name says
            # phi3, and fails on a vocabulary without them: a neutral name.
            value = "kiln family fixture"
        meta.append((key, model.metadata_types[key], value))
    meta += [(k, vocab.metadata_types[k], v) for k, v in vocab.metadata.items() if k.startswith("tokenizer.")]
    tensors = []
    for name, info in model.tensor_infos.items():
        w = model.tensors[name]
        if name in ("token_embd.weight", "output.weight"):
            w = (0.2 * rng.standard_normal((n_vocab, w.shape[1]))).astype(np.float32)
        tensors.append((name, w))
    gg.write_gguf(dst, meta, tensors)


def run(args, env):
    return subprocess.run(args, capture_output=True, check=True, env=env)


def main():
    bin_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "/work/anchors/llama.cpp/build/bin")
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    os.makedirs(OUT, exist_ok=True)
    vocab = gg.read_gguf(VOCAB)
    rng = np.random.default_rng(20261128)
    lines = ["# written by tests/reference/make_family_llamacpp_fixtures.py (llama.cpp c392e509)",
             f"bytes {BYTES}", f"ctx {CTX}", f"n_predict {N_PREDICT}", "simple_ctx 32",
             f"prompt {PROMPT}"]
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(TEXT, "rb") as f, open(text, "wb") as g:
            g.write(f.read(BYTES))
        for model in MODELS:
            name = os.path.basename(model)
            path = os.path.join(OUT, name + ".gguf")
            with_vocabulary(os.path.join(FIXTURES, model + ".gguf"), path, vocab, rng)
            err = run([os.path.join(bin_dir, "llama-perplexity"), "-m", path, "-f", text, "-c", str(CTX), "-b",
                       str(CTX), "-t", "1"], env).stderr.decode()
            ppl, unc = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", err).groups()
            out = run([os.path.join(bin_dir, "llama-simple"), "-m", path, "-n", str(N_PREDICT), PROMPT], env).stdout
            # llama-simple prints the BOS piece "<s> " and the prompt before the continuation.
            out = out.rstrip(b"\n")
            head = b"<s> " + PROMPT.encode()
            assert out.startswith(head), out[:40]
            lines += [f"{name} ppl {ppl} {unc}", f"{name} greedy {out[len(head):].hex()}"]
            print(name, "ppl", ppl, "greedy", out[len(head):])
    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
