#!/usr/bin/env python3
"""PyTorch's side of the tests of kiln's torch.save writer and of kiln-convert's export of
encoder-decoder models (tests/test_export_torch.cpp runs it and asserts its verdict line).

    check_torch_export.py archive FILE [--weights-only]
        Checks FILE as a zip (Python's zipfile: every CRC-32, every entry's data 64-byte
        aligned as torch writes them), loads it with torch.load (weights_only=True when
        asked), and prints its content one leaf per line: "<path> = <repr>", tensors as
        "tensor <dtype> <shape> <values>" (and "storage-of <path>" for a tensor sharing an
        earlier one's storage). Last line: "verdict: ok".

    check_torch_export.py model FILE --logits F --source IDS --prefix IDS [--original PT]
        torch.load(FILE, weights_only=True); builds transformer_reference.Seq2SeqTransformer
        from its model_args and loads the state dict with strict=True; runs the source
        (comma-separated ids) and the decoder prefix; compares the logits with kiln's
        (F: raw little-endian float32, [len(prefix), vocab]) within 1e-4. With --original,
        also requires every tensor of PT's "model" to equal FILE's (same names, dtypes,
        values), and its model_args, itos and specials to be FILE's.
        Last line: "verdict: ok max_abs_diff=<x>" or "verdict: FAIL <why>".
"""
import argparse
import os
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_reference import Seq2SeqTransformer  # noqa: E402


def fail(why):
    print("verdict: FAIL " + why)
    sys.exit(0)


def check_zip(path):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        if bad is not None:
            fail("CRC-32 mismatch in " + bad)
        with open(path, "rb") as f:
            raw = f.read()
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                fail(info.filename + " is compressed")
            h = info.header_offset
            name_len = int.from_bytes(raw[h + 26:h + 28], "little")
            extra_len = int.from_bytes(raw[h + 28:h + 30], "little")
            start = h + 30 + name_len + extra_len
            if start % 64 != 0:
                fail("%s: data at byte %d, not 64-byte aligned" % (info.filename, start))
        return [i.filename for i in z.infolist()]


def dump(value, path, out, seen):
    if isinstance(value, torch.Tensor):
        ptr = value.storage().data_ptr()
        shared = seen.get(ptr)
        seen.setdefault(ptr, path)
        values = value.float().flatten().tolist()
        line = "%s = tensor %s %s %s" % (path, str(value.dtype).replace("torch.", ""), list(value.shape),
                                         ["%.9g" % v for v in values])
        if shared is not None:
            line += " storage-of " + shared
        out.append(line)
    elif isinstance(value, dict):
        out.append("%s = %s(%d)" % (path, type(value).__name__, len(value)))
        for k, v in value.items():
            dump(v, "%s[%r]" % (path, k), out, seen)
    elif isinstance(value, (list, tuple)):
        out.append("%s = %s(%d)" % (path, type(value).__name__, len(value)))
        for i, v in enumerate(value):
            dump(v, "%s[%d]" % (path, i), out, seen)
    else:
        out.append("%s = %r" % (path, value))


def archive(args):
    names = check_zip(args.file)
    print("entries: " + " ".join(names))
    try:
        obj = torch.load(args.file, weights_only=args.weights_only)
    except Exception as e:  # noqa: BLE001: any failure is the verdict
        fail("torch.load: %s" % e)
    out = []
    dump(obj, "root", out, {})
    print("\n".join(out))
    print("verdict: ok")


def ids(text):
    return [int(x) for x in text.split(",")]


def model(args):
    check_zip(args.file)
    try:
        ckpt = torch.load(args.file, weights_only=True)
    except Exception as e:  # noqa: BLE001
        fail("torch.load(weights_only=True): %s" % e)
    a = ckpt["model_args"]
    m = Seq2SeqTransformer(a["vocab_size"], a["d_model"], a["nhead"], a["num_encoder_layers"],
                           a["num_decoder_layers"], a["dim_feedforward"], a["norm_first"], a["activation"],
                           a.get("layer_norm_eps", 1e-5), a["max_len"])
    try:
        m.load_state_dict(ckpt["model"], strict=True)
    except Exception as e:  # noqa: BLE001
        fail("load_state_dict(strict=True): %s" % e)
    m.eval()
    src, prefix = ids(args.source), ids(args.prefix)
    with torch.no_grad():
        logits = m(torch.tensor([src]), torch.tensor([prefix]))[0].float().numpy()
    kiln = np.fromfile(args.logits, dtype="<f4")
    if kiln.size != logits.size:
        fail("kiln gave %d logits, torch %d" % (kiln.size, logits.size))
    diff = float(np.max(np.abs(kiln.reshape(logits.shape) - logits)))
    print("itos: %d tokens, specials %s" % (len(ckpt.get("itos", [])), sorted(ckpt.get("specials", {}).items())))
    sd = ckpt["model"]
    print("tied: tgt_embed=src_embed %s, generator=tgt_embed %s" % (
        sd["tgt_embed.weight"].data_ptr() == sd["src_embed.weight"].data_ptr(),
        sd["generator.weight"].data_ptr() == sd["tgt_embed.weight"].data_ptr()))
    if args.original:
        orig = torch.load(args.original, weights_only=False)
        if list(orig["model"].keys()) != list(sd.keys()):
            fail("state dict names differ: %s vs %s" % (sorted(set(orig["model"]) ^ set(sd)), len(sd)))
        for k, t in orig["model"].items():
            if t.dtype != sd[k].dtype or not torch.equal(t, sd[k]):
                fail("tensor %s differs from the original's" % k)
        for k, v in orig["model_args"].items():
            if a.get(k, 1e-5 if k == "layer_norm_eps" else None) != v:
                fail("model_args.%s is %r, the original's %r" % (k, a.get(k), v))
        for k in ("itos", "specials"):
            if orig.get(k) != ckpt.get(k):
                fail("%s differs from the original's" % k)
        print("original: every tensor, model_args, itos and specials equal")
    if diff > 1e-4:
        fail("max_abs_diff=%g over 1e-4" % diff)
    print("verdict: ok max_abs_diff=%g" % diff)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("archive")
    a.add_argument("file")
    a.add_argument("--weights-only", action="store_true")
    m = sub.add_parser("model")
    m.add_argument("file")
    m.add_argument("--logits", required=True)
    m.add_argument("--source", required=True)
    m.add_argument("--prefix", required=True)
    m.add_argument("--original")
    args = p.parse_args()
    archive(args) if args.command == "archive" else model(args)


if __name__ == "__main__":
    main()
