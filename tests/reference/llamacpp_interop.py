#!/usr/bin/env python3
"""Checks that GGUF files written by kiln-convert run in llama.cpp and give the expected
greedy text (not part of the test suite: llama.cpp is built outside the repository).

    /usr/bin/python3 tests/reference/llamacpp_interop.py LLAMA_CPP_BIN_DIR [KILN_BUILD_DIR]

LLAMA_CPP_BIN_DIR holds llama.cpp's llama-simple (and its shared libraries); KILN_BUILD_DIR
defaults to build/. Checks, each printed as "equal" or "DIFF":
  1. llama architecture: ../shared/models/stories260K.bin + tok512.bin converted by kiln-convert
     (f32 and q8_0); llama-simple's greedy 64 tokens after "Once upon a time" equal kiln's
     (`kiln -m F -p "Once upon a time" -n 64 --temp 0`).
  2. gpt2 architecture: tests/fixtures/gpt2/gpt2_hf{,_untied} converted by kiln-convert;
     llama-simple's greedy 24 tokens for each reference prompt equal the PyTorch reference's
     (make_gpt2_fixtures.py: pI.greedy, byte-decoded through the fixture's tokenizer.json). This
     also checks that llama.cpp's BPE tokenizer encodes the prompts as the Python reference did.
Exit status 1 when anything differs.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
from make_gpt2_fixtures import bytes_to_unicode  # noqa: E402


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, env=env, check=True).stdout


def main():
    llama_bin = os.path.abspath(sys.argv[1])
    build = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build"))
    env = dict(os.environ, LD_LIBRARY_PATH=llama_bin)
    simple = os.path.join(llama_bin, "llama-simple")
    convert = os.path.join(build, "convert", "kiln-convert")
    kiln = os.path.join(build, "tools", "kiln")
    shared = os.path.join(ROOT, "..", "shared", "models")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for extra in ([], ["--type", "q8_0"]):
            out = os.path.join(tmp, "stories.gguf")
            run([convert, os.path.join(shared, "stories260K.bin"), "--tokenizer", os.path.join(shared, "tok512.bin"),
                 "-o", out] + extra)
            theirs = run([simple, "-m", out, "-n", "64", "Once upon a time"], env).decode()
            ours = run([kiln, "-m", out, "-p", "Once upon a time", "-n", "64", "--temp", "0", "-t", "2"]).decode()
            # llama-simple prints the BOS piece "<s> " before the prompt.
            same = theirs.replace("<s> ", "", 1).strip() == ours.strip()
            ok &= same
            print("stories260K %s: llama.cpp vs kiln %s\n  %r" % (" ".join(extra) or "f32", "equal" if same else "DIFF",
                                                                 ours.strip()))
        byte_order, chars = bytes_to_unicode()
        to_byte = {c: b for b, c in zip(byte_order, chars)}
        for name in ("gpt2_hf", "gpt2_hf_untied"):
            folder = os.path.join(ROOT, "tests", "fixtures", "gpt2", name)
            out = os.path.join(tmp, name + ".gguf")
            run([convert, folder, "-o", out])
            tok = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
            pieces = {i: t for t, i in tok["model"]["vocab"].items()}
            for added in tok["added_tokens"]:
                pieces[added["id"]] = ""  # special tokens print nothing
            ref = gguf_io.read_gguf(os.path.join(folder + "_reference.gguf"))
            for p in range(ref.metadata["reference.prompt_count"]):
                prompt = ref.metadata["p%d.text" % p]
                ids = [int(i) for i in ref.tensors["p%d.greedy" % p]]
                want = prompt.encode() + bytes(to_byte[c] for i in ids for c in pieces[i])
                got = run([simple, "-m", out, "-n", str(len(ids)), prompt], env).rstrip(b"\n")
                same = got == want
                ok &= same
                print("%s p%d: llama.cpp vs PyTorch reference greedy (%d tokens) %s" % (name, p, len(ids),
                                                                                       "equal" if same else "DIFF"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
