#!/usr/bin/env python3
"""Checks the vocabulary files `kiln-convert GGUF -o FOLDER --to safetensors` wrote
against the GGUF's tokenizer.* metadata, independently of kiln's C++ readers.

    /usr/bin/python3 tests/reference/check_hf_vocabulary.py FOLDER MODEL.gguf

tokenizer.model is decoded by the minimal protobuf wire-format reader below
(SentencePiece's ModelProto: 1 pieces {1 piece, 2 score, 3 type}, 2 trainer_spec
{3 model_type, 4 vocab_size, 35 byte_fallback, 40..43 unk/bos/eos/pad id},
3 normalizer_spec {1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces});
tokenizer.json (byte-level BPE) is read with json. Prints one line per check
group and exits 1 on the first mismatch. numpy only (via gguf_io); where Debian's
python3-sentencepiece is installed, SentencePiece itself also loads tokenizer.model.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402

NONE = 4294967295


def varint(b, i):
    value, shift = 0, 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def fields(b):
    """(field number, wire type, value) of one message: ints, bytes or 4-byte floats."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
            if v >= 1 << 63:
                v -= 1 << 64  # int32 written sign-extended
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 5:
            v, i = struct.unpack("<f", b[i:i + 4])[0], i + 4
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
        out.append((number, wire, v))
    return out


def check(ok, what):
    if not ok:
        print("MISMATCH:", what)
        sys.exit(1)


def spm(folder, md):
    model = fields(open(os.path.join(folder, "tokenizer.model"), "rb").read())
    pieces, trainer, normalizer = [], {}, {}
    for number, _, v in model:
        if number == 1:
            p = {n: x for n, _, x in fields(v)}
            pieces.append((p[1].decode("utf-8"), p.get(2, 0.0), p.get(3, 1)))
        elif number == 2:
            trainer = {n: x for n, _, x in fields(v)}
        elif number == 3:
            normalizer = {n: x for n, _, x in fields(v)}
    tokens = md["tokenizer.ggml.tokens"]
    check([p[0] for p in pieces] == tokens, "pieces != tokenizer.ggml.tokens")
    scores = md.get("tokenizer.ggml.scores", [0.0] * len(tokens))
    check([p[1] for p in pieces] == [struct.unpack("<f", struct.pack("<f", s))[0] for s in scores], "scores")
    check([p[2] for p in pieces] == md.get("tokenizer.ggml.token_type", [1] * len(tokens)), "types")
    print(f"tokenizer.model: {len(pieces)} pieces, scores and types equal the GGUF's")

    def want(key, default):
        v = md.get(key, default)
        return -1 if v == NONE or v >= len(tokens) else v
    for number, key, default in ((40, "unknown", 0), (41, "bos", 1), (42, "eos", 2), (43, "padding", -1)):
        check(trainer.get(number) == want(f"tokenizer.ggml.{key}_token_id", default), f"trainer_spec {number}")
    check(trainer.get(4) == len(tokens), "vocab_size")
    check(normalizer.get(1) == b"identity", "normalizer name")
    check(bool(normalizer.get(3, 1)) == md.get("tokenizer.ggml.add_space_prefix", True), "add_dummy_prefix")
    try:
        import sentencepiece  # Debian's python3-sentencepiece, optional
    except ImportError:
        print("(python3-sentencepiece not installed: the file was not loaded by SentencePiece itself)")
    else:
        sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        check(sp.vocab_size() == len(tokens), "SentencePiece's vocab_size")
        check([sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()] == [trainer.get(n) for n in (40, 41, 42, 43)],
              "SentencePiece's special ids")
        print(f"SentencePiece {sentencepiece.__version__} loads it; 'Once upon a time' ->",
              sp.encode("Once upon a time"))
    print(f"trainer_spec: model_type {trainer.get(3)}, unk/bos/eos/pad {[trainer.get(n) for n in (40, 41, 42, 43)]}; "
          f"normalizer_spec: add_dummy_prefix {normalizer.get(3)}")


def bpe(folder, md):
    j = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    tokens, types = md["tokenizer.ggml.tokens"], md.get("tokenizer.ggml.token_type")
    by_id = {i: t for t, i in j["model"]["vocab"].items()}
    for a in j["added_tokens"]:
        check(a["id"] not in by_id or by_id[a["id"]] == a["content"], f"added token {a['id']}")
        by_id[a["id"]] = a["content"]
        check(types is None or types[a["id"]] == (3 if a["special"] else 4), f"type of added token {a['id']}")
    for i, t in enumerate(tokens):
        check(by_id.get(i, f"<unused_{i}>") == t, f"token {i}")
    check([m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]] == md.get("tokenizer.ggml.merges", []),
          "merges")
    print(f"tokenizer.json: {len(tokens)} tokens ({len(j['added_tokens'])} added), "
          f"{len(j['model']['merges'])} merges equal the GGUF's; pre_tokenizer {j['pre_tokenizer']['type']}")


def main():
    folder, gguf = sys.argv[1], sys.argv[2]
    md = gguf_io.read_gguf(gguf, load_tensors=False).metadata
    kind = md.get("tokenizer.ggml.model")
    if kind == "llama":
        spm(folder, md)
    elif kind == "gpt2":
        bpe(folder, md)
    else:
        print(f"no vocabulary files expected (tokenizer.ggml.model {kind!r})")
        return
    tc = json.load(open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8"))
    tokens = md["tokenizer.ggml.tokens"]
    for field, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")):
        i = md.get(f"tokenizer.ggml.{key}_token_id")
        if i is not None and i < len(tokens):
            check(tc.get(field) == tokens[i], field)
    if "tokenizer.chat_template" in md:
        t = tc["chat_template"]
        check((t if isinstance(t, str) else {x["name"]: x["template"] for x in t}["default"]) == md["tokenizer.chat_template"],
              "chat_template")
    print(f"tokenizer_config.json: special tokens {[tc.get(f) for f in ('bos_token', 'eos_token', 'unk_token', 'pad_token')]}"
          f", add_bos_token {tc.get('add_bos_token')}")


if __name__ == "__main__":
    main()
