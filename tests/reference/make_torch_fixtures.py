#!/usr/bin/env python3
"""Writes tests/fixtures/torch/: PyTorch checkpoints (torch.save zip archives),
hostile and broken archives, and the values every tensor must read back as, for
tests/test_torch_checkpoint.cpp (kiln's formats/checkpoint/torch_checkpoint.h
and llama_state_dict.h).

Run from anywhere with Debian's python3 and torch (1.13):

    /usr/bin/python3 tests/reference/make_torch_fixtures.py

Files (torch.save's archive folder is named after the file, e.g. "llama_f32/"):
  llama_f32.pt    (a) a tiny llama2.c model.py state dict (dim 32, 2 layers,
                  4 heads, 2 kv heads, hidden 64, vocab 64) saved the way
                  llama2.c's train.py saves checkpoints: {"model": sd,
                  "optimizer": ..., "model_args": {...}, "iter_num": 5,
                  "best_val_loss": 0-dim tensor, "config": {...}}. The state
                  dict is an OrderedDict with a `_metadata` attribute like
                  nn.Module.state_dict() returns (so the pickle has a BUILD),
                  and output.weight *is* tok_embeddings.weight (the same
                  tensor, so the same storage), as model.py ties them. The
                  optimizer part is small and fake but shaped like AdamW's
                  state_dict(): int keys, a list of dicts, a tuple of floats,
                  None, a 0-dim "step" tensor. Default pickle protocol (2).
  llama_f16.pt    (b) the same state dict cast to float16 tensor by tensor (so
                  output.weight gets its own storage: not tied), saved with
                  pickle_protocol=4 (FRAME, MEMOIZE, STACK_GLOBAL,
                  SHORT_BINUNICODE).
  llama_bf16.pt   (b) the same cast to bfloat16, protocol 2.
  views.pt        (c) tensors that are views: a transpose (non-contiguous), a
                  slice sharing its base's storage at an offset, a row and a
                  column of a matrix (offset; offset + stride), an expand
                  (stride 0), a 0-dim tensor and an empty one.
  parameter.pt    (d) nn.Parameter objects (requires_grad true and false).
  hostile_os_system.pt  (e) data.pkl calls os.system("touch /tmp/kiln-pwned");
                  the pickle is written byte by byte here and never loaded.
  traversal.pt    (f) a zip whose first entry is named "../evil".
  truncated.pt    (g) the first 10000 bytes of llama_f32.pt.
  deflated.pt     (h) views.pt's entries recompressed with deflate.
  expected.gguf   every tensor of (a)-(d) as float32 (float16/bfloat16 values
                  widen exactly), named "<file stem>/<dotted name>", e.g.
                  "llama_f32/model.layers.0.attention.wq.weight". Written by
                  gguf_io.write_gguf, numpy shape = torch shape; a 0-dim tensor
                  is stored with shape (1,). The empty tensor is not stored.

Determinism: every value comes from a torch.Generator with a fixed seed, and
torch 1.13's zip writer stores fixed timestamps (1980-01-01), so re-running the
script reproduces the same bytes (checked: two runs give identical files). The
archive folder name comes from the file name, which is why the file names are
part of the fixture.
"""
import collections
import os
import struct
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402  (sibling module)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "torch")
SEED = 20240705

DIM, N_LAYERS, N_HEADS, N_KV_HEADS, HIDDEN, VOCAB = 32, 2, 4, 2, 64, 64
HEAD_DIM = DIM // N_HEADS

expected = []  # (name, float32 numpy array) for expected.gguf


def path(name):
    return os.path.join(OUT, name)


def record(stem, flat):
    """Adds every tensor of a {dotted name: tensor} dict to expected.gguf."""
    for name, t in flat.items():
        if t.numel() == 0:
            continue
        arr = t.detach().float().contiguous().numpy().astype(np.float32)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        expected.append(("%s/%s" % (stem, name), arr))


def flatten(obj, prefix=""):
    """Dotted names of the tensors inside nested dicts/lists, as kiln names them."""
    out = collections.OrderedDict()
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flatten(v, "%s.%d" % (prefix, i)))
    return out


def llama_state_dict(gen):
    """llama2.c model.py's parameter names and shapes; output tied to tok_embeddings."""
    def w(*shape):
        return torch.randn(*shape, generator=gen) * 0.1

    sd = collections.OrderedDict()
    emb = w(VOCAB, DIM)
    sd["tok_embeddings.weight"] = emb
    for i in range(N_LAYERS):
        p = "layers.%d." % i
        sd[p + "attention.wq.weight"] = w(N_HEADS * HEAD_DIM, DIM)
        sd[p + "attention.wk.weight"] = w(N_KV_HEADS * HEAD_DIM, DIM)
        sd[p + "attention.wv.weight"] = w(N_KV_HEADS * HEAD_DIM, DIM)
        sd[p + "attention.wo.weight"] = w(DIM, N_HEADS * HEAD_DIM)
        sd[p + "feed_forward.w1.weight"] = w(HIDDEN, DIM)
        sd[p + "feed_forward.w2.weight"] = w(DIM, HIDDEN)
        sd[p + "feed_forward.w3.weight"] = w(HIDDEN, DIM)
        sd[p + "attention_norm.weight"] = 1.0 + w(DIM)
        sd[p + "ffn_norm.weight"] = 1.0 + w(DIM)
    sd["norm.weight"] = 1.0 + w(DIM)
    # model.py ties the two (self.tok_embeddings.weight = self.output.weight) and
    # state_dict() detaches each: two tensor objects, one storage.
    sd["output.weight"] = emb.detach()
    # What nn.Module.state_dict() attaches; pickled as the OrderedDict's state (BUILD).
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    return sd


def model_args():
    return {"dim": DIM, "n_layers": N_LAYERS, "n_heads": N_HEADS, "n_kv_heads": N_KV_HEADS,
            "vocab_size": VOCAB, "hidden_dim": HIDDEN, "multiple_of": 32, "norm_eps": 1e-5,
            "max_seq_len": 128, "dropout": 0.0}


def cast(sd, dtype):
    out = collections.OrderedDict((k, v.to(dtype)) for k, v in sd.items())
    out._metadata = sd._metadata
    return out


def make_llama(gen):
    sd = llama_state_dict(gen)
    optimizer = {
        "state": {0: {"step": torch.tensor(5.0), "exp_avg": torch.randn(3, 2, generator=gen)}},
        "param_groups": [{"lr": 5e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1,
                          "foreach": None, "maximize": False, "params": [0, 1, 2]}],
    }
    ckpt = {"model": sd, "optimizer": optimizer, "model_args": model_args(), "iter_num": 5,
            "best_val_loss": torch.tensor(1.5), "config": {"out_dir": "out", "batch_size": 8,
                                                            "dtype": "float32", "compile": False}}
    torch.save(ckpt, path("llama_f32.pt"))
    record("llama_f32", flatten(ckpt))
    for stem, dtype, protocol in (("llama_f16", torch.float16, 4), ("llama_bf16", torch.bfloat16, 2)):
        c = {"model": cast(sd, dtype), "model_args": model_args(), "iter_num": 5}
        torch.save(c, path(stem + ".pt"), pickle_protocol=protocol)
        record(stem, flatten(c))


def make_views(gen):
    m = torch.randn(3, 4, generator=gen)
    base = torch.randn(8, generator=gen)
    views = {
        "matrix": m,
        "transposed": m.t(),               # shape (4, 3), stride (1, 4): non-contiguous
        "row": m[1],                       # offset 4, contiguous
        "column": m[:, 2],                 # offset 2, stride 4
        "base": base,
        "slice": base[2:6],                # offset 2 into base's storage
        "expanded": torch.randn(4, generator=gen).expand(3, 4),  # stride (0, 1)
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
    }
    assert not views["transposed"].is_contiguous() and views["slice"].storage_offset() == 2
    torch.save(views, path("views.pt"))
    record("views", flatten(views))


def make_parameter(gen):
    params = {"weight": torch.nn.Parameter(torch.randn(3, 2, generator=gen)),
              "frozen": torch.nn.Parameter(torch.randn(2, generator=gen), requires_grad=False)}
    torch.save(params, path("parameter.pt"))
    record("parameter", flatten(params))


def stored_zip(name, entries):
    """A zip with STORED entries written by Python's zipfile (fixed timestamps)."""
    with zipfile.ZipFile(path(name), "w", compression=zipfile.ZIP_STORED) as z:
        for entry_name, data in entries:
            info = zipfile.ZipInfo(entry_name, date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, data)


def hostile_pickle():
    """os.system("touch /tmp/kiln-pwned") as protocol-2 opcodes, written by hand."""
    command = b"touch /tmp/kiln-pwned"
    return (b"\x80\x02"                                    # PROTO 2
            + b"cos\nsystem\n"                             # GLOBAL os.system
            + b"X" + struct.pack("<I", len(command)) + command  # BINUNICODE
            + b"\x85"                                      # TUPLE1
            + b"R"                                         # REDUCE: the call a loader must refuse
            + b".")                                        # STOP


def make_broken():
    stored_zip("hostile_os_system.pt", [("hostile_os_system/data.pkl", hostile_pickle()),
                                        ("hostile_os_system/version", b"3\n")])
    stored_zip("traversal.pt", [("../evil", b"not yours"),
                                ("traversal/data.pkl", b"\x80\x02}q\x00."),  # an empty dict
                                ("traversal/version", b"3\n")])
    with open(path("llama_f32.pt"), "rb") as f:
        whole = f.read()
    with open(path("truncated.pt"), "wb") as f:
        f.write(whole[:10000])
    with zipfile.ZipFile(path("views.pt")) as src, \
            zipfile.ZipFile(path("deflated.pt"), "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            out.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(out, src.read(info.filename))


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    make_llama(gen)
    make_views(gen)
    make_parameter(gen)
    make_broken()
    gguf_io.write_gguf(path("expected.gguf"), [("kiln.fixture.seed", gguf_io.UINT32, SEED)], expected)
    total = sum(os.path.getsize(path(f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, to %s" % (len(os.listdir(OUT)), total, os.path.normpath(OUT)))


if __name__ == "__main__":
    main()
