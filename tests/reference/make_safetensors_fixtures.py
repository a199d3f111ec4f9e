#!/usr/bin/env python3
"""Writes tests/fixtures/safetensors/ (deterministic; numpy only).

The safetensors files are written by hand from the format description, not by
kiln's writer, so the C++ reader is checked against an independent encoder:

    u64 little-endian header length N | N bytes of JSON header | data
    header = {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}

Outputs:
  stories260K_hf/config.json, stories260K_hf/model.safetensors
      /work/shared/models/stories260K.gguf re-laid out the way Hugging Face's
      LlamaForCausalLM stores it: HF names, torch (out, in) shapes, and q_proj /
      k_proj rows permuted for HF's rotate-half RoPE (what Meta's
      convert_llama_weights_to_hf.py does). kiln must undo the permutation and
      get back stories260K.gguf's bytes exactly.
  stories260K_hf/tokenizer.model
      stories260K.gguf's vocabulary (pieces, scores, types) as a SentencePiece
      ModelProto, protobuf-encoded by hand (spm_model_proto); pad_id -1 is a
      10-byte sign-extended varint as protobuf writes negative int32s.
  small.safetensors
      F32, F16 and BF16 tensors, a scalar, an empty tensor and __metadata__,
      with header keys in a different order than the data.
  Broken files, one defect each: header_past_end, overlap, unknown_dtype
  (F8_E4M3), size_mismatch, truncated, invalid_json, duplicate_name.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_io import read_gguf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "safetensors")
GGUF = "/work/shared/models/stories260K.gguf"

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}


def encode(entries, metadata=None):
    """entries: list of (name, dtype string, shape, raw bytes) in data order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return _with_header(json.dumps(header, separators=(",", ":")), data)


def array_entry(name, array):
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a scalar 1-D)
    return (name, _DTYPES[array.dtype], array.shape, array.tobytes())


def hf_permute(w, n_head):
    """Meta layout -> HF layout: the inverse of kiln's un-permutation."""
    rows, dim = w.shape
    head_dim = rows // n_head
    return w.reshape(n_head, head_dim // 2, 2, dim).transpose(0, 2, 1, 3).reshape(rows, dim)


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)


def make_hf_folder():
    g = read_gguf(GGUF)
    md = g.metadata
    n_layer = md["llama.block_count"]
    n_head = md["llama.attention.head_count"]
    n_kv = md["llama.attention.head_count_kv"]
    t = g.tensors
    entries = [array_entry("model.embed_tokens.weight", t["token_embd.weight"])]
    layer_names = [
        ("attn_q.weight", "self_attn.q_proj.weight"), ("attn_k.weight", "self_attn.k_proj.weight"),
        ("attn_v.weight", "self_attn.v_proj.weight"), ("attn_output.weight", "self_attn.o_proj.weight"),
        ("attn_norm.weight", "input_layernorm.weight"), ("ffn_gate.weight", "mlp.gate_proj.weight"),
        ("ffn_down.weight", "mlp.down_proj.weight"), ("ffn_up.weight", "mlp.up_proj.weight"),
        ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ]
    for layer in range(n_layer):
        for gguf_name, hf_name in layer_names:
            w = t["blk.%d.%s" % (layer, gguf_name)]
            if gguf_name == "attn_q.weight":
                w = hf_permute(w, n_head)
            elif gguf_name == "attn_k.weight":
                w = hf_permute(w, n_kv)
            entries.append(array_entry("model.layers.%d.%s" % (layer, hf_name), w))
    entries.append(array_entry("model.norm.weight", t["output_norm.weight"]))
    entries.append(array_entry("lm_head.weight", t["output.weight"]))
    folder = os.path.join(OUT, "stories260K_hf")
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "model.safetensors"), encode(entries, {"format": "pt"}))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": md["llama.embedding_length"],
        "intermediate_size": md["llama.feed_forward_length"],
        "max_position_embeddings": md["llama.context_length"],
        "model_type": "llama",
        "num_attention_heads": n_head,
        "num_hidden_layers": n_layer,
        "num_key_value_heads": n_kv,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "vocab_size": t["token_embd.weight"].shape[0],
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    write(os.path.join(folder, "tokenizer.model"), spm_model_proto(
        md["tokenizer.ggml.tokens"], md["tokenizer.ggml.scores"], md["tokenizer.ggml.token_type"]))


def _varint(n):
    n &= (1 << 64) - 1  # negative int32s are sign-extended to 10 bytes, as protobuf does
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _field(number, wire, payload):
    key = _varint(number << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def spm_model_proto(pieces, scores, types):
    """A SentencePiece ModelProto, encoded by hand from the protobuf wire format:
    pieces (1: piece 1, score 2, type 3), trainer_spec (2: unk_id 40, bos_id 41,
    eos_id 42, pad_id 43 = -1), normalizer_spec (3: name 1, add_dummy_prefix 3)."""
    out = b""
    for piece, score, kind in zip(pieces, scores, types):
        body = _field(1, 2, piece.encode("utf-8")) + _field(2, 5, struct.pack("<f", score))
        if kind != 1:  # NORMAL is the default and, as protobuf does, not written
            body += _field(3, 0, _varint(kind))
        out += _field(1, 2, body)
    trainer = (_field(3, 0, _varint(512)) + _field(40, 0, _varint(0)) + _field(41, 0, _varint(1))
               + _field(42, 0, _varint(2)) + _field(43, 0, _varint(-1)))
    normalizer = _field(1, 2, b"identity") + _field(3, 0, _varint(1))
    return out + _field(2, 2, trainer) + _field(3, 2, normalizer)


def make_small():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
    b = np.array([1.0, -2.0, 0.25, 65504.0], dtype=np.float16)
    # BF16 by hand: the top 16 bits of the float32 (these values are exact).
    c32 = np.array([[1.0, -1.5], [3.0, 0.0078125]], dtype=np.float32)
    c = (c32.view(np.uint32) >> 16).astype("<u2")
    s = np.array(7.0, dtype=np.float32)
    entries = [array_entry("a", a), array_entry("b", b), ("c", "BF16", c.shape, c.tobytes()),
               array_entry("scalar", s), ("empty", "F32", (0, 4), b"")]
    # Header keys in an order unlike the data order.
    header = {"__metadata__": {"format": "pt", "note": "kiln fixture"}}
    data = b""
    spans = {}
    for name, dtype, shape, raw in entries:
        spans[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    for name in ["scalar", "c", "empty", "a", "b"]:
        header[name] = spans[name]
    write(os.path.join(OUT, "small.safetensors"), _with_header(json.dumps(header), data))


def _with_header(text, data):
    text = text.encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def make_broken():
    two = np.array([1.0, 2.0], dtype=np.float32).tobytes()
    four = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32).tobytes()

    def blob(header, data):
        return _with_header(json.dumps(header), data)

    good = blob({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, two)
    write(os.path.join(OUT, "header_past_end.safetensors"), struct.pack("<Q", len(good)) + good[8:])
    write(os.path.join(OUT, "overlap.safetensors"), blob({
        "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, four))
    write(os.path.join(OUT, "unknown_dtype.safetensors"), blob({
        "x": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}}, two))
    write(os.path.join(OUT, "size_mismatch.safetensors"), blob({
        "x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, four))
    write(os.path.join(OUT, "truncated.safetensors"), blob({
        "x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, four)[:-4])
    text = b'{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]'  # no closing braces
    write(os.path.join(OUT, "invalid_json.safetensors"), struct.pack("<Q", len(text)) + text + two)
    text = (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            b'"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}')
    write(os.path.join(OUT, "duplicate_name.safetensors"), struct.pack("<Q", len(text)) + text + two)


def main():
    os.makedirs(OUT, exist_ok=True)
    make_hf_folder()
    make_small()
    make_broken()


if __name__ == "__main__":
    main()
