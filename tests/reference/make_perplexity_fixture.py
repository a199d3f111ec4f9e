#!/usr/bin/env python3
"""Writes tests/fixtures/llama/stories260K_perplexity.txt: the perplexity that
`kiln-perplexity -c 64` must report on the first 3000 bytes of Tiny Shakespeare
with stories260K, computed independently of kiln:

  tokens  spm_reference.encode (Python SentencePiece BPE), no BOS
  logits  llama_reference.LlamaReference (PyTorch), one forward per window
  score   consecutive non-overlapping windows of 64 tokens, positions 1..63 of
          each scored as -log softmax(logits[i])[token[i+1]], PPL = exp(mean)

How it was run:  /usr/bin/python3 tests/reference/make_perplexity_fixture.py
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_reference  # noqa: E402
import spm_reference  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
TEXT = os.path.join(SHARED, "data", "tinyshakespeare.txt")
N_BYTES = 3000
CTX = 64
OUT = os.path.join(REPO, "tests", "fixtures", "llama", "stories260K_perplexity.txt")


def main():
    torch.set_num_threads(1)
    with open(TEXT, "rb") as f:
        text = f.read(N_BYTES)  # spm_reference works on UTF-8 bytes
    tokens = spm_reference.encode(spm_reference.Vocab(MODEL), text, add_bos=False)
    model = llama_reference.LlamaReference.from_gguf(MODEL)
    windows = len(tokens) // CTX
    nll, scored = 0.0, 0
    for w in range(windows):
        window = tokens[w * CTX:(w + 1) * CTX]
        logits = model.forward(window).double()
        logp = torch.log_softmax(logits, dim=-1)
        for i in range(CTX - 1):
            nll -= logp[i, window[i + 1]].item()
            scored += 1
    ppl = math.exp(nll / scored)
    with open(OUT, "w") as f:
        f.write("# written by tests/reference/make_perplexity_fixture.py (PyTorch %s)\n" % torch.__version__)
        f.write("bytes %d\nctx %d\ntokens %d\nwindows %d\nscored %d\nppl %.10f\n"
                % (N_BYTES, CTX, len(tokens), windows, scored, ppl))
    print("tokens %d, windows %d, scored %d, PPL %.6f" % (len(tokens), windows, scored, ppl))


if __name__ == "__main__":
    main()
