#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/<target>/: the small seed inputs the libFuzzer
targets of tests/fuzz/ start from (scripts/fuzz.sh). Each seed is a valid (or
nearly valid) file of the format its target parses, as small as the format
allows, so that mutations reach the deep parts of the parser quickly.

Run from anywhere with Debian's python3 (torch 1.13):

    KILN_SHARED_DIR=/work/shared /usr/bin/python3 tests/fuzz/make_fuzz_corpus.py

Nothing here runs kiln: the files are written by torch.save, pickle and
zipfile, or byte by byte from the formats' published layouts (llama2.c's
export.py, SentencePiece's sentencepiece_model.proto, safetensors' spec), so
they are independent of the parsers they feed. Re-running gives the same
bytes (fixed values; torch 1.13's zip writer stores fixed timestamps), except
torch_pickle/legacy.pt, whose storage keys legacy torch.save takes from
object ids.

Targets and seeds:
  zip_archive/          torch.save archives (llama2.c model.py state dict in
                        train.py's checkpoint layout, nanoGPT, a seq2seq
                        torch.nn.Transformer with a vocabulary, protocol 2 and 4),
                        and zipfile archives with a deflated entry and a comment
  torch_pickle/         the data.pkl of those archives (the target wraps the
                        pickle into an archive with storages of the right sizes),
                        and a legacy (pre-1.6) torch.save file
  safetensors/          F32/F16/BF16 tensors, __metadata__, an empty tensor, a 0-dim one
  hf_config/            the config.json of every Hugging Face fixture folder
                        (the target pairs each with that folder's weights)
  hf_tokenizer/         tokenizer.json files: GPT-2 ByteLevel, Llama 3 and Qwen2
                        Split regexes, SmolLM digits, merges as strings and pairs
  hf_tokenizer_config/  tokenizer_config.json files (templates, special tokens)
  spm_model/            SentencePiece ModelProto files written field by field
  llama2c/              llama2.c checkpoints: legacy shared/unshared, ak42 v1, v2
  llama2c_tokenizer/    llama2.c tokenizer.bin files
  nanogpt_meta/         nanoGPT meta.pkl files (itos and stoi, protocols 2, 4, 5)
  tokenizer/            prompt text (first byte picks the tokenizer)
"""
import collections
import io
import json
import os
import pickle
import shutil
import struct
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
FIXTURES = os.path.join(HERE, "..", "fixtures")
# stories260K's tokenizer (tok512.bin) lives in the shared model folder (cmake -DKILN_SHARED_DIR).
SHARED = os.environ.get("KILN_SHARED_DIR", "/work/shared")


def target_dir(target):
    d = os.path.join(OUT, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(target, name, data):
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data)


def values(n, scale=0.25):
    """n deterministic small floats (no randomness: seeds must not change between runs)."""
    return [((i * 7) % 11 - 5) * scale / 5 for i in range(n)]


def tensor(*shape, dtype=torch.float32):
    n = 1
    for d in shape:
        n *= d
    return torch.tensor(values(n), dtype=torch.float32).reshape(shape).to(dtype)


# --- torch.save archives and their pickles -------------------------------------------------

DIM, HIDDEN, HEADS, KV_HEADS, VOCAB = 4, 8, 2, 1, 8


def llama_state_dict(dtype=torch.float32):
    sd = collections.OrderedDict()
    sd["tok_embeddings.weight"] = tensor(VOCAB, DIM, dtype=dtype)
    kv = DIM // HEADS * KV_HEADS
    sd["layers.0.attention.wq.weight"] = tensor(DIM, DIM, dtype=dtype)
    sd["layers.0.attention.wk.weight"] = tensor(kv, DIM, dtype=dtype)
    sd["layers.0.attention.wv.weight"] = tensor(kv, DIM, dtype=dtype)
    sd["layers.0.attention.wo.weight"] = tensor(DIM, DIM, dtype=dtype)
    sd["layers.0.feed_forward.w1.weight"] = tensor(HIDDEN, DIM, dtype=dtype)
    sd["layers.0.feed_forward.w2.weight"] = tensor(DIM, HIDDEN, dtype=dtype)
    sd["layers.0.feed_forward.w3.weight"] = tensor(HIDDEN, DIM, dtype=dtype)
    sd["layers.0.attention_norm.weight"] = tensor(DIM, dtype=dtype)
    sd["layers.0.ffn_norm.weight"] = tensor(DIM, dtype=dtype)
    sd["norm.weight"] = tensor(DIM, dtype=dtype)
    sd["output.weight"] = sd["tok_embeddings.weight"]  # tied, as model.py ties them
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    return sd


def llama_train_checkpoint():
    return {
        "model": llama_state_dict(),
        "model_args": {"dim": DIM, "n_layers": 1, "n_heads": HEADS, "n_kv_heads": KV_HEADS, "vocab_size": VOCAB,
                       "hidden_dim": HIDDEN, "multiple_of": 4, "norm_eps": 1e-5, "max_seq_len": 16, "dropout": 0.0},
        "optimizer": {"state": {0: {"step": torch.tensor(5.0)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.95), "params": [0], "fused": None}]},
        "iter_num": 5,
        "best_val_loss": torch.tensor(2.5),
        "config": {"dtype": "float32", "big": 18446744073709551615},
    }


def nanogpt_checkpoint(bias):
    n_embd, vocab, block = 4, 8, 4
    sd = collections.OrderedDict()
    sd["transformer.wte.weight"] = tensor(vocab, n_embd)
    sd["transformer.wpe.weight"] = tensor(block, n_embd)
    parts = [("ln_1", (n_embd,)), ("attn.c_attn", (3 * n_embd, n_embd)), ("attn.c_proj", (n_embd, n_embd)),
             ("ln_2", (n_embd,)), ("mlp.c_fc", (4 * n_embd, n_embd)), ("mlp.c_proj", (n_embd, 4 * n_embd))]
    for name, shape in parts:
        sd[f"transformer.h.0.{name}.weight"] = tensor(*shape)
        if bias:
            sd[f"transformer.h.0.{name}.bias"] = tensor(shape[0])
    sd["transformer.ln_f.weight"] = tensor(n_embd)
    if bias:
        sd["transformer.ln_f.bias"] = tensor(n_embd)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return {"model": {"_orig_mod." + k: v for k, v in sd.items()} if not bias else sd,
            "model_args": {"n_layer": 1, "n_head": 2, "n_embd": n_embd, "block_size": block, "bias": bias,
                           "vocab_size": vocab, "dropout": 0.0},
            "iter_num": 1, "best_val_loss": torch.tensor(1.0)}


def seq2seq_checkpoint():
    d, ff, vocab = 4, 8, 6
    model = torch.nn.Transformer(d_model=d, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=ff, dropout=0.0, batch_first=True)
    sd = collections.OrderedDict()
    sd["src_embed.weight"] = tensor(vocab, d)
    sd["tgt_embed.weight"] = sd["src_embed.weight"]
    for k, v in model.state_dict().items():
        sd["transformer." + k] = tensor(*v.shape) if v.dim() > 0 else v
    sd["generator.weight"] = sd["src_embed.weight"]
    sd["generator.bias"] = tensor(vocab)
    return {"model": sd, "model_args": {"nhead": 2, "d_model": d, "num_encoder_layers": 1, "num_decoder_layers": 1,
                                        "dim_feedforward": ff, "norm_first": False, "activation": "relu",
                                        "layer_norm_eps": 1e-5, "max_len": 16},
            "itos": ["<pad>", "<s>", "</s>", "a", "b", "é"], "specials": {"bos": "<s>", "eos": "</s>", "pad": "<pad>"}}


def views_checkpoint():
    base = tensor(4, 3)
    return {"transposed": base.t(), "row": base[1], "column": base[:, 2], "expanded": tensor(3).expand(2, 3),
            "scalar": torch.tensor(1.5), "empty": torch.zeros(0), "half": tensor(2, 2, dtype=torch.float16),
            "bf16": tensor(3, dtype=torch.bfloat16), "ints": [1, 2, 3], "mixed": (1, 2.5, True), "text": "x",
            "raw": b"\x00\x01", "dtype": torch.float16, "none": None}


def torch_bytes(obj, protocol=2, legacy=False, name="archive"):
    buffer = io.BytesIO()
    buffer.name = name  # torch.save names the archive folder after the file
    torch.save(obj, buffer, pickle_protocol=protocol, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


def data_pkl(archive):
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


def torch_seeds():
    target_dir("zip_archive")
    target_dir("torch_pickle")
    checkpoints = {
        "llama_train": (llama_train_checkpoint(), 2),
        "llama_sd_p4": ({"state_dict": llama_state_dict(torch.float16), "model_args": {"n_heads": HEADS}}, 4),
        "nanogpt_bias": (nanogpt_checkpoint(True), 2),
        "nanogpt_compiled_p4": (nanogpt_checkpoint(False), 4),
        "seq2seq": (seq2seq_checkpoint(), 2),
        "views": (views_checkpoint(), 4),
    }
    for name, (obj, protocol) in checkpoints.items():
        archive = torch_bytes(obj, protocol)
        if name in ("llama_train", "nanogpt_bias", "views"):  # the archives are large-ish: a few suffice
            write("zip_archive", name + ".pt", archive)
        write("torch_pickle", name + ".pkl", data_pkl(archive))
    write("torch_pickle", "legacy.pt", torch_bytes({"w": tensor(2)}, legacy=True))

    # Archives zipfile writes: a deflated entry, a comment, an extra directory entry.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.comment = b"PK\x05\x06 a comment"
        z.writestr(zipfile.ZipInfo("archive/data.pkl", (1980, 1, 1, 0, 0, 0)), pickle.dumps({"a": 1}, protocol=2))
        info = zipfile.ZipInfo("archive/data/0", (1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, b"\x00" * 64)
        z.writestr(zipfile.ZipInfo("archive/dir/", (1980, 1, 1, 0, 0, 0)), b"")
    write("zip_archive", "zipfile_deflate_comment.zip", buffer.getvalue())


# --- safetensors ---------------------------------------------------------------------------

def safetensors_file(tensors, metadata=None, pad_to=8):
    """tensors: [(name, dtype string, shape, raw bytes)] in data order."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % pad_to)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    target_dir("safetensors")
    f32 = struct.pack("<6f", *values(6))
    f16 = tensor(2, 2, dtype=torch.float16).numpy().tobytes()
    bf16 = struct.pack("<3H", 0x3f80, 0xbf80, 0x7f80)
    write("safetensors", "mixed.safetensors", safetensors_file(
        [("a.weight", "F32", [2, 3], f32), ("b", "F16", [2, 2], f16), ("c", "BF16", [3], bf16),
         ("empty", "F32", [0, 4], b""), ("scalar", "F32", [], struct.pack("<f", 2.0))],
        {"format": "pt", "note": "x"}))
    write("safetensors", "one.safetensors", safetensors_file([("w", "F32", [1], struct.pack("<f", 1.0))]))
    shutil.copy(os.path.join(FIXTURES, "safetensors", "small.safetensors"), os.path.join(OUT, "safetensors"))


# --- Hugging Face JSON files ---------------------------------------------------------------

HF_FOLDERS = ["hf_family/llama3", "hf_family/llama_linear", "hf_family/mistral_yarn", "hf_family/qwen2",
              "hf_family/phi3", "hf_family/phi3_longrope", "hf_family/gemma", "hf_family/gemma2", "gpt2/gpt2_hf"]


def hf_seeds():
    target_dir("hf_config")
    for folder in HF_FOLDERS:
        shutil.copy(os.path.join(FIXTURES, folder, "config.json"),
                    os.path.join(OUT, "hf_config", folder.split("/")[-1] + ".json"))

    target_dir("hf_tokenizer")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    plain_byte_level = dict(byte_level, use_regex=False)
    llama3_regex = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    qwen2_regex = llama3_regex.replace(r"\p{N}{1,3}", r"\p{N}")
    split = lambda regex: {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
    vocab = {t: i for i, t in enumerate(["a", "b", "c", "ab", "abc", "Ġ", "Ġa", "1", "2", "12"])}
    merges = ["a b", "ab c", "Ġ a", "1 2"]

    def tokenizer(pre, pair_merges=False, added=()):
        return json.dumps({
            "version": "1.0", "added_tokens": [
                {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": s} for i, c, s in added],
            "normalizer": None, "pre_tokenizer": pre,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
                      "vocab": vocab, "merges": [m.split(" ") for m in merges] if pair_merges else merges}},
            ensure_ascii=False, indent=1).encode()

    write("hf_tokenizer", "gpt2.json", tokenizer(byte_level, added=[(10, "<|endoftext|>", True)]))
    write("hf_tokenizer", "llama3.json", tokenizer({"type": "Sequence", "pretokenizers": [
        split(llama3_regex), plain_byte_level]}, pair_merges=True,
        added=[(10, "<|begin_of_text|>", True), (11, "<|end_of_text|>", True), (13, "<tool>", False)]))
    write("hf_tokenizer", "qwen2.json", tokenizer({"type": "Sequence", "pretokenizers": [
        split(qwen2_regex), plain_byte_level]}, added=[(10, "<|im_start|>", True), (11, "<|im_end|>", True)]))
    write("hf_tokenizer", "smollm.json", tokenizer({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, byte_level]}))

    target_dir("hf_tokenizer_config")
    # Token texts are those of the vocabulary the target loads (tests/fixtures/gpt2/gpt2_hf/tokenizer.json).
    write("hf_tokenizer_config", "string_template.json", json.dumps({
        "add_bos_token": False, "add_eos_token": True, "bos_token": "<|endoftext|>",
        "eos_token": {"content": "<|endoftext|>", "lstrip": False, "special": True}, "unk_token": None,
        "pad_token": "a", "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}).encode())
    write("hf_tokenizer_config", "named_templates.json", json.dumps({
        "chat_template": [{"name": "default", "template": "{{ bos_token }}"},
                          {"name": "tool_use", "template": "{{ tools | tojson }}"}],
        "bos_token": "b", "model_max_length": 18446744073709551615}).encode())


# --- SentencePiece ModelProto --------------------------------------------------------------

def varint(n):
    n &= (1 << 64) - 1  # negative int32 fields are sign-extended to 10 bytes, as protobuf does
    out = b""
    while True:
        byte = n & 0x7f
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 5:
        return key + payload
    return key + varint(len(payload)) + payload


def spm_model(pieces, trainer=None, normalizer=None):
    """pieces: [(text, score, type or None)]; trainer: {field number: int}."""
    out = b""
    for text, score, kind in pieces:
        piece = field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score))
        if kind is not None:
            piece += field(3, 0, kind)
        out += field(1, 2, piece)
    if trainer is not None:
        out += field(2, 2, b"".join(field(n, 0, v) for n, v in trainer.items()) + field(1, 2, b"corpus.txt"))
    if normalizer is not None:
        out += field(3, 2, field(1, 2, b"nmt_nfkc") + field(3, 0, normalizer))
    return out


def spm_seeds():
    target_dir("spm_model")
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("<0x0A>", 0.0, 6), ("\u2581a", -1.0, None),
              ("b", -2.0, 1), ("<mask>", 0.0, 4), ("unused", 0.0, 5)]
    write("spm_model", "llama.model", spm_model(pieces, {40: 0, 41: 1, 42: 2, 43: -1}, normalizer=1))
    write("spm_model", "no_prefix.model", spm_model(pieces[:3] + [("x", -0.5, 1)], {40: 0, 41: -1, 42: 2}, 0))
    write("spm_model", "defaults.model", spm_model([("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]))


# --- llama2.c ------------------------------------------------------------------------------

def floats(n):
    return struct.pack(f"<{n}f", *values(n))


def llama2c_seeds():
    target_dir("llama2c")
    dim, hidden, layers, heads, kv_heads, vocab, seq = 8, 16, 1, 2, 1, 8, 4
    head_dim = dim // heads
    kv_dim = head_dim * kv_heads
    q, kv, ffn, emb = dim * dim, kv_dim * dim, hidden * dim, vocab * dim
    config = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq)

    def legacy(shared):
        head = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq)
        body = (floats(emb) + floats(layers * dim) + floats(layers * q) + floats(layers * kv) * 2 +
                floats(layers * q) + floats(layers * dim) + floats(layers * ffn) * 3 + floats(dim) +
                floats(seq * head_dim // 2) * 2)
        return head + body + (b"" if shared else floats(emb))

    def versioned(version, shared, group=4):
        head = struct.pack("<Ii", 0x616b3432, version) + config + bytes([1 if shared else 0])
        if version == 2:
            head += struct.pack("<i", group)
        head += b"\x00" * (256 - len(head))
        norms = floats(layers * dim) * 2 + floats(dim)
        if version == 1:
            body = floats(emb) + floats(layers * q) + floats(layers * kv) * 2 + floats(layers * q) + \
                floats(layers * ffn) * 3
            return head + norms + body + (b"" if shared else floats(emb))

        def q8(n):
            return bytes((i * 37) % 256 for i in range(n)) + struct.pack(f"<{n // group}f", *([0.01] * (n // group)))
        body = q8(emb) + b"".join(q8(n) for n in (q, kv, kv, q, ffn, ffn, ffn) for _ in range(layers))
        return head + norms + body + (b"" if shared else q8(emb))

    write("llama2c", "legacy_shared.bin", legacy(True))
    write("llama2c", "legacy_unshared.bin", legacy(False))
    write("llama2c", "v1_shared.bin", versioned(1, True))
    write("llama2c", "v2_unshared.bin", versioned(2, False))

    target_dir("llama2c_tokenizer")

    def tokenizer_bin(pieces):
        out = struct.pack("<I", max(len(p) for p, _ in pieces))
        for piece, score in pieces:
            out += struct.pack("<fi", score, len(piece)) + piece
        return out
    write("llama2c_tokenizer", "tok8.bin", tokenizer_bin(
        [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0), (b"<0x0A>", 0.0), (b" a", -1.0), (b"b", -2.0),
         (b" ", -3.0), ("é".encode(), -4.0)]))
    with open(os.path.join(SHARED, "models", "tok512.bin"), "rb") as f:
        tok512 = f.read()
    # The first 40 tokens of stories260K's tokenizer (the byte pieces and the specials).
    at, pieces = 4, []
    for _ in range(40):
        score, length = struct.unpack_from("<fi", tok512, at)
        pieces.append((tok512[at + 8:at + 8 + length], score))
        at += 8 + length
    write("llama2c_tokenizer", "tok512_head.bin", tokenizer_bin(pieces))


# --- nanoGPT meta.pkl ----------------------------------------------------------------------

def nanogpt_meta_seeds():
    target_dir("nanogpt_meta")
    chars = sorted(set("\n !',.?abcdeé"))
    itos = {i: ch for i, ch in enumerate(chars)}
    stoi = {ch: i for i, ch in enumerate(chars)}
    write("nanogpt_meta", "meta_p2.pkl", pickle.dumps({"vocab_size": len(chars), "itos": itos, "stoi": stoi}, 2))
    write("nanogpt_meta", "meta_p4.pkl", pickle.dumps({"vocab_size": len(chars), "itos": itos, "stoi": stoi}, 4))
    write("nanogpt_meta", "stoi_only_p5.pkl", pickle.dumps({"vocab_size": len(chars), "stoi": stoi}, 5))


def tokenizer_seeds():
    target_dir("tokenizer")
    write("tokenizer", "mixed.txt", b"\x00Hello world 12345 <|endoftext|> \xe4\xb8\xad\xe6\x96\x87")
    write("tokenizer", "spaces.txt", b"\x03  tabs\tand\r\nnewlines\n\n  don't 1,000,000 \xf0\x9f\xa6\x99 <s></s>")


def main():
    torch_seeds()
    safetensors_seeds()
    hf_seeds()
    spm_seeds()
    llama2c_seeds()
    nanogpt_meta_seeds()
    tokenizer_seeds()


if __name__ == "__main__":
    main()
