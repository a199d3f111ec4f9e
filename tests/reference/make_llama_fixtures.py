#!/usr/bin/env python3
"""Writes tests/fixtures/llama/stories260K_reference.gguf: reference logits and
greedy continuations of stories260K (Llama architecture, GQA) from the PyTorch
reference in llama_reference.py.

Run (torch imports only under Debian's python):

    /usr/bin/python3 tests/reference/make_llama_fixtures.py [--model PATH] [--out PATH]

The model defaults to ../shared/models/stories260K.gguf (relative to the repo).
The output is deterministic (one thread, float32, fixed prompts, struct-written
GGUF): rerunning reproduces the same bytes on the same torch build.

Contents (N = 0 .. fixture.prompts-1; tensors are F32 unless noted):
  pN.tokens         I32 (n_prompt,)      prompt token ids (BOS = 1 first where used)
  pN.logits         (n_prompt, vocab)    logits at every prompt position, one batched forward
  pN.greedy         I32 (100,)           greedy (argmax, first index on ties) continuation;
                                         not stopped at EOS (id 2)
  pN.greedy_logits  (3, vocab)           logits that chose the last 3 greedy tokens
                                         (positions n_prompt+96 .. n_prompt+98)
  metadata: general.architecture = "kiln-fixture", fixture.prompts (u32),
  fixture.generated_by, fixture.model (file name), fixture.model_sha256,
  fixture.n_generate (u32), and per prompt pN.text (decoded prompt), pN.greedy_text
  (decoded continuation), pN.first_eos (i32: index in pN.greedy of the first EOS, or -1),
  pN.max_abs_logit (f32, over pN.logits and every greedy step), pN.min_top2_gap (f32:
  smallest top1 - top2 logit over the greedy steps), pN.min_top2_gap_step (i32).
Decoding: vocab strings from the model, U+2581 -> space, <0xNN> -> that byte,
control tokens (<s>, </s>, <unk>) dropped, UTF-8 with replacement; the single
leading space of the first piece is kept (no SentencePiece stripping).
"""
import argparse
import hashlib
import os
import re
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402
from gguf_io import FLOAT32, INT32, STRING, UINT32  # noqa: E402
from llama_reference import DEFAULT_MODEL, LlamaConfig, LlamaReference  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "fixtures", "llama", "stories260K_reference.gguf"))
N_GENERATE = 100
N_TAIL = 3
EOS = 2

# prompt C: "Lily wanted to play with her friend." (▁Lily ▁want ed ▁to ▁play ▁with ▁her ▁friend .)
PROMPT_C = [1, 317, 391, 266, 267, 337, 335, 311, 374, 426]
# prompt E: " Tim saw a big ball.\nThe" with a byte token (<0x0A>, id 13) and pieces without ▁
PROMPT_E = [1, 326, 394, 261, 370, 268, 388, 426, 13, 434, 260]
PROMPT_A = [1, 403, 407, 261, 378]   # "Once upon a time"
PROMPT_D_EXTRA = 35                  # D = A + the first 35 greedy tokens of A (40 tokens)


def decode(vocab, types, ids):
    out = bytearray()
    for i in ids:
        s = vocab[i]
        if types is not None and types[i] in (2, 3):  # unknown, control
            continue
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", s)
        if m and (types is None or types[i] == 6):
            out.append(int(m.group(1), 16))
        else:
            out += s.replace("\u2581", " ").encode("utf-8")
    return out.decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser(description="write the stories260K reference fixture")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()

    with open(args.model, "rb") as f:
        model_sha = hashlib.sha256(f.read()).hexdigest()
    g = gguf_io.read_gguf(args.model)
    model = LlamaReference(LlamaConfig(g.metadata), g.tensors)
    vocab = g.metadata["tokenizer.ggml.tokens"]
    types = g.metadata.get("tokenizer.ggml.token_type")

    gen_a, _ = model.generate_greedy(PROMPT_A, PROMPT_D_EXTRA)
    assert EOS not in gen_a, "prompt D would contain EOS"
    prompts = [PROMPT_A, [1], PROMPT_C, PROMPT_A + gen_a, PROMPT_E]
    assert all(0 <= t < model.vocab for p in prompts for t in p)

    meta = [
        ("general.architecture", STRING, "kiln-fixture"),
        ("fixture.prompts", UINT32, len(prompts)),
        ("fixture.generated_by", STRING, "tests/reference/make_llama_fixtures.py (torch %s, numpy %s)"
         % (torch.__version__, np.__version__)),
        ("fixture.model", STRING, os.path.basename(args.model)),
        ("fixture.model_sha256", STRING, model_sha),
        ("fixture.n_generate", UINT32, N_GENERATE),
    ]
    tensors = []
    for n, prompt in enumerate(prompts):
        p = "p%d." % n
        logits = model.forward(prompt).numpy().astype(np.float32)
        greedy, steps = model.generate_greedy(prompt, N_GENERATE)
        steps = np.stack(steps).astype(np.float32)
        # the first greedy step's logits come from the same forward as the last prompt row
        assert np.array_equal(steps[0], logits[-1])
        top2 = np.sort(steps, axis=1)[:, -2:]
        gaps = top2[:, 1] - top2[:, 0]
        first_eos = greedy.index(EOS) if EOS in greedy else -1
        max_abs = float(max(np.abs(logits).max(), np.abs(steps).max()))
        meta += [
            (p + "text", STRING, decode(vocab, types, prompt)),
            (p + "greedy_text", STRING, decode(vocab, types, greedy)),
            (p + "first_eos", INT32, first_eos),
            (p + "max_abs_logit", FLOAT32, max_abs),
            (p + "min_top2_gap", FLOAT32, float(gaps.min())),
            (p + "min_top2_gap_step", INT32, int(gaps.argmin())),
        ]
        tensors += [
            (p + "tokens", np.array(prompt, dtype=np.int32)),
            (p + "logits", logits),
            (p + "greedy", np.array(greedy, dtype=np.int32)),
            (p + "greedy_logits", np.ascontiguousarray(steps[-N_TAIL:])),
        ]
        print("p%d: %d tokens %r\n    first_eos %d, max|logit| %.3f, min top-2 gap %.4g at step %d\n    greedy: %r"
              % (n, len(prompt), decode(vocab, types, prompt), first_eos, max_abs, gaps.min(), gaps.argmin(),
                 decode(vocab, types, greedy)))

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    gguf_io.write_gguf(tmp, meta, tensors)
    os.replace(tmp, args.out)

    # read it back and compare
    back = gguf_io.read_gguf(args.out)
    for name, arr in tensors:
        assert np.array_equal(back.tensors[name], arr), name
    for key, _, value in meta:
        assert back.metadata[key] == value or abs(back.metadata[key] - value) <= 1e-6 * abs(value), key
    with open(args.out, "rb") as f:
        data = f.read()
    print("wrote %s: %d bytes, sha256 %s, in %.1f s"
          % (args.out, len(data), hashlib.sha256(data).hexdigest(), time.time() - t0))


if __name__ == "__main__":
    main()
