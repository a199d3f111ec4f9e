#!/usr/bin/env python3
"""Writes tests/fixtures/llama2c/: a small random Llama model in every llama2.c
checkpoint layout, its tokenizer.bin, and GGUF files holding what kiln's
reader (formats/checkpoint/llama2c.cpp) must produce from them.

    /usr/bin/python3 tests/reference/make_llama2c_fixtures.py

numpy only. Deterministic: values come from a fixed integer generator (not
numpy's, whose streams may change between releases) and every file is packed
with struct, so a rerun reproduces the committed bytes.

The layouts are written here from llama2.c's export.py / tokenizer.py /
run.c / runq.c descriptions (little-endian throughout):

  legacy  7 x int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
          vocab_size, seq_len), vocab_size negated when the classifier is not
          shared; float32 arrays stacked over layers: tok_embeddings,
          attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, final norm,
          freqs_cos and freqs_sin (seq_len x head_dim/2 each), classifier if
          not shared.
  v1      u32 magic 0x616b3432 ("ak42"), int32 1, the 7 int32, u8 shared flag,
          zeros to byte 256; float32: attention norms, ffn norms, final norm,
          tok_embeddings, wq, wk, wv, wo, w1, w2, w3, classifier if not shared.
  v2      as v1 with version 2 and an int32 group size right after the flag
          byte (byte 37); the norms in float32, then for each matrix (the
          embedding, then every layer's wq, ..., w3, then the classifier if not
          shared) its int8 values followed at once by its float32 scales, one
          per group: scale = max|w| / 127, q = round(w / scale).
  tokenizer.bin  u32 max_token_length, then per token: f32 score, i32 length,
          bytes; U+2581 written as ' ', BOS/EOS written as "\\n<s>\\n", "\\n</s>\\n".

Outputs (model: dim 32, hidden 64, 2 layers, 4 heads, 2 kv heads, vocab 64,
seq_len 16):
  legacy_shared.bin, legacy_unshared.bin, v1_shared.bin, v1_unshared.bin,
  v2_shared.bin, v2_unshared.bin (group size 32), tok64.bin,
  expected_f32.gguf  the float32 weights under llama.cpp names and ggml dims
                     (output.weight is the unshared files' classifier), and the
                     metadata kiln must write (general.name excepted: it is the
                     model file's stem), tokenizer included;
  expected_q8.gguf   the same for the v2 files: every matrix dequantized
                     (q * scale in float32), the norms unchanged.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_io import ARRAY, FLOAT32, INT32, STRING, UINT32, write_gguf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "llama2c")

DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ = 32, 64, 2, 4, 2, 64, 16
HEAD_DIM = DIM // HEADS
KV_DIM = HEAD_DIM * KV_HEADS
GROUP = 32
MAGIC = 0x616B3432


class SplitMix64:
    """A fixed integer generator, so the fixture never depends on numpy's RNG streams."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def floats(self, shape, scale, offset=0.0):
        n = int(np.prod(shape))
        # 24 random bits -> [-1, 1) exactly representable in float32
        u = np.array([(self.next() >> 40) for _ in range(n)], dtype=np.float64) / float(1 << 23) - 1.0
        return (u * scale + offset).astype(np.float32).reshape(shape)


def make_weights():
    rng = SplitMix64(20240611)
    w = {
        "tok": rng.floats((VOCAB, DIM), 0.5),
        "att_norm": [rng.floats((DIM,), 0.2, 1.0) for _ in range(LAYERS)],
        "wq": [rng.floats((DIM, DIM), 0.2) for _ in range(LAYERS)],
        "wk": [rng.floats((KV_DIM, DIM), 0.2) for _ in range(LAYERS)],
        "wv": [rng.floats((KV_DIM, DIM), 0.2) for _ in range(LAYERS)],
        "wo": [rng.floats((DIM, DIM), 0.2) for _ in range(LAYERS)],
        "ffn_norm": [rng.floats((DIM,), 0.2, 1.0) for _ in range(LAYERS)],
        "w1": [rng.floats((HIDDEN, DIM), 0.2) for _ in range(LAYERS)],
        "w2": [rng.floats((DIM, HIDDEN), 0.2) for _ in range(LAYERS)],
        "w3": [rng.floats((HIDDEN, DIM), 0.2) for _ in range(LAYERS)],
        "norm": rng.floats((DIM,), 0.2, 1.0),
        "cls": rng.floats((VOCAB, DIM), 0.5),
    }
    return w


def f32(*arrays):
    return b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in arrays)


def config(vocab):
    return struct.pack("<7i", DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, vocab, SEQ)


def rope_tables():
    freqs = 1.0 / (10000.0 ** (np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM))
    angles = np.outer(np.arange(SEQ, dtype=np.float64), freqs)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def legacy(w, shared):
    cos, sin = rope_tables()
    parts = [config(VOCAB if shared else -VOCAB), f32(w["tok"])]
    for key in ("att_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
        parts.append(f32(*w[key]))
    parts.append(f32(w["norm"], cos, sin))
    if not shared:
        parts.append(f32(w["cls"]))
    return b"".join(parts)


def versioned_header(version, shared, extra=b""):
    head = struct.pack("<Ii", MAGIC, version) + config(VOCAB) + struct.pack("<B", int(shared)) + extra
    return head + b"\0" * (256 - len(head))


def matrices(w, shared):
    out = [w["tok"]]
    for key in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
        out.extend(w[key])
    if not shared:
        out.append(w["cls"])
    return out


def v1(w, shared):
    norms = f32(*w["att_norm"], *w["ffn_norm"], w["norm"])
    return versioned_header(1, shared) + norms + f32(*matrices(w, shared))


def quantize(m):
    groups = m.reshape(-1, GROUP)
    scale = (np.abs(groups).max(axis=1) / np.float32(127.0)).astype(np.float32)
    q = np.round(groups / scale[:, None]).astype(np.int8)
    return q, scale


def dequantize(m):
    q, scale = quantize(m)
    return (q.astype(np.float32) * scale[:, None]).astype(np.float32).reshape(m.shape)


def v2(w, shared):
    parts = [versioned_header(2, shared, struct.pack("<i", GROUP)), f32(*w["att_norm"], *w["ffn_norm"], w["norm"])]
    for m in matrices(w, shared):
        q, scale = quantize(m)
        parts.append(q.astype("<i1").tobytes() + f32(scale))
    return b"".join(parts)


# The tokenizer as SentencePiece spells it: (piece, score, llama.cpp token type).
def spm_vocab():
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [("<0x%02X>" % b, 0.0, 6) for b in range(24)]
    words = ["\u2581t", "he", "\u2581a", "\u2581the", "\u2581", "\u2581\u2581", "\u2581once", "\u2581upon",
             "\u2581time", ".", ",", "\u00e9", "\u2581caf\u00e9", "\u4e16", "\u2581\u2581\u2581", "ing",
             "\u2581was", "\u2581little", "<0x1G>", "<0xab>", "\u2581she", "\u2581he", "ed", "\u2581to",
             "\u2581and", "er", "\u2581girl", "\u2581named", "\u2581Lily", "!", "\u2581day", "\u2581big",
             "\u2581dog", "\u2581cat", "\u2581sun", "\u2581\u2581and", "s"]
    pieces += [(p, -float(i) - 0.25, 1) for i, p in enumerate(words)]
    assert len(pieces) == VOCAB, len(pieces)
    return pieces


def tokenizer_bin(vocab):
    # what llama2.c's tokenizer.py export does to each piece
    raw = []
    for i, (piece, score, _) in enumerate(vocab):
        text = "\n<s>\n" if i == 1 else "\n</s>\n" if i == 2 else piece
        raw.append((text.replace("\u2581", " ").encode("utf-8"), score))
    out = [struct.pack("<I", max(len(b) for b, _ in raw))]
    for b, score in raw:
        out.append(struct.pack("<fi", score, len(b)) + b)
    return b"".join(out)


def metadata(vocab):
    return [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "expected"),
        ("llama.context_length", UINT32, SEQ),
        ("llama.embedding_length", UINT32, DIM),
        ("llama.feed_forward_length", UINT32, HIDDEN),
        ("llama.block_count", UINT32, LAYERS),
        ("llama.attention.head_count", UINT32, HEADS),
        ("llama.attention.head_count_kv", UINT32, KV_HEADS),
        ("llama.rope.dimension_count", UINT32, HEAD_DIM),
        ("llama.attention.layer_norm_rms_epsilon", FLOAT32, 1e-5),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", (ARRAY, STRING), [p for p, _, _ in vocab]),
        ("tokenizer.ggml.scores", (ARRAY, FLOAT32), [s for _, s, _ in vocab]),
        ("tokenizer.ggml.token_type", (ARRAY, INT32), [t for _, _, t in vocab]),
        ("tokenizer.ggml.unknown_token_id", UINT32, 0),
        ("tokenizer.ggml.bos_token_id", UINT32, 1),
        ("tokenizer.ggml.eos_token_id", UINT32, 2),
    ]


def expected_tensors(w, convert):
    # llama.cpp names; a numpy (rows, cols) array is written with ggml dims [cols, rows]
    out = [("token_embd.weight", convert(w["tok"])), ("output_norm.weight", w["norm"]),
           ("output.weight", convert(w["cls"]))]
    for l in range(LAYERS):
        out += [
            ("blk.%d.attn_q.weight" % l, convert(w["wq"][l])),
            ("blk.%d.attn_k.weight" % l, convert(w["wk"][l])),
            ("blk.%d.attn_v.weight" % l, convert(w["wv"][l])),
            ("blk.%d.attn_output.weight" % l, convert(w["wo"][l])),
            ("blk.%d.attn_norm.weight" % l, w["att_norm"][l]),
            ("blk.%d.ffn_gate.weight" % l, convert(w["w1"][l])),
            ("blk.%d.ffn_down.weight" % l, convert(w["w2"][l])),
            ("blk.%d.ffn_up.weight" % l, convert(w["w3"][l])),
            ("blk.%d.ffn_norm.weight" % l, w["ffn_norm"][l]),
        ]
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    w = make_weights()
    vocab = spm_vocab()
    files = {
        "legacy_shared.bin": legacy(w, True),
        "legacy_unshared.bin": legacy(w, False),
        "v1_shared.bin": v1(w, True),
        "v1_unshared.bin": v1(w, False),
        "v2_shared.bin": v2(w, True),
        "v2_unshared.bin": v2(w, False),
        "tok64.bin": tokenizer_bin(vocab),
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    write_gguf(os.path.join(OUT, "expected_f32.gguf"), metadata(vocab), expected_tensors(w, lambda m: m))
    write_gguf(os.path.join(OUT, "expected_q8.gguf"), metadata(vocab), expected_tensors(w, dequantize))
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %d files to %s (%d bytes)" % (len(files) + 2, os.path.normpath(OUT), total))


if __name__ == "__main__":
    main()
