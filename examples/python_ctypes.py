#!/usr/bin/env python3
"""Greedy generation through kiln's C API (include/kiln.h) from Python's ctypes.

    python3 examples/python_ctypes.py --lib build/capi/libkiln.so \
        -m ../shared/models/stories260K.gguf -p "Once upon a time" -n 32

Prints the prompt and its continuation, as `kiln --temp 0` does. Only the
standard library is needed.
"""
import argparse
import ctypes
import sys

kiln_token = ctypes.c_int32


class ModelInfo(ctypes.Structure):
    _fields_ = [("architecture", ctypes.c_char_p), ("n_vocab", ctypes.c_int32),
                ("n_ctx_train", ctypes.c_int32), ("n_params", ctypes.c_uint64),
                ("has_chat_template", ctypes.c_int32), ("bos", kiln_token), ("eos", kiln_token)]


class ContextParams(ctypes.Structure):
    _fields_ = [("n_ctx", ctypes.c_int32), ("n_slots", ctypes.c_int32),
                ("n_threads", ctypes.c_int32), ("cache_type", ctypes.c_int)]


class KilnError(RuntimeError):
    pass


class Kiln:
    """The few kiln.h functions this example calls, with their C signatures."""

    BUFFER_TOO_SMALL = 2

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        p = ctypes.POINTER
        sigs = {
            "kiln_last_error": (ctypes.c_char_p, []),
            "kiln_model_load": (ctypes.c_int, [ctypes.c_char_p, p(ctypes.c_void_p)]),
            "kiln_model_free": (None, [ctypes.c_void_p]),
            "kiln_model_get_info": (ctypes.c_int, [ctypes.c_void_p, p(ModelInfo)]),
            "kiln_tokenize": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int32,
                                             ctypes.c_int32, p(kiln_token), ctypes.c_int32, p(ctypes.c_int32)]),
            "kiln_token_piece": (ctypes.c_int, [ctypes.c_void_p, kiln_token, ctypes.c_char_p, ctypes.c_size_t,
                                                p(ctypes.c_size_t)]),
            "kiln_token_is_eog": (ctypes.c_int32, [ctypes.c_void_p, kiln_token]),
            "kiln_context_default_params": (ContextParams, []),
            "kiln_context_new": (ctypes.c_int, [ctypes.c_void_p, p(ContextParams), p(ctypes.c_void_p)]),
            "kiln_context_free": (None, [ctypes.c_void_p]),
            "kiln_decode": (ctypes.c_int, [ctypes.c_void_p, p(kiln_token), p(ctypes.c_int32), ctypes.c_int32]),
            "kiln_logits": (p(ctypes.c_float), [ctypes.c_void_p, ctypes.c_int32]),
        }
        for name, (restype, argtypes) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes
        self.lib = lib

    def check(self, status):
        if status != 0:
            raise KilnError(self.lib.kiln_last_error().decode("utf-8", "replace"))

    def tokenize(self, model, text):
        data = text.encode("utf-8")
        n = ctypes.c_int32(0)
        status = self.lib.kiln_tokenize(model, data, len(data), 1, 1, None, 0, ctypes.byref(n))
        if status not in (0, self.BUFFER_TOO_SMALL):
            self.check(status)
        tokens = (kiln_token * n.value)()
        self.check(self.lib.kiln_tokenize(model, data, len(data), 1, 1, tokens, n.value, ctypes.byref(n)))
        return list(tokens)

    def piece(self, model, token):
        buf = ctypes.create_string_buffer(256)
        n = ctypes.c_size_t(0)
        self.check(self.lib.kiln_token_piece(model, token, buf, len(buf), ctypes.byref(n)))
        return buf.raw[:n.value]


def generate(kiln, model_path, prompt, n_predict):
    lib = kiln.lib
    model = ctypes.c_void_p()
    kiln.check(lib.kiln_model_load(model_path.encode(), ctypes.byref(model)))
    ctx = ctypes.c_void_p()
    try:
        info = ModelInfo()
        kiln.check(lib.kiln_model_get_info(model, ctypes.byref(info)))
        params = lib.kiln_context_default_params()
        kiln.check(lib.kiln_context_new(model, ctypes.byref(params), ctypes.byref(ctx)))
        tokens = kiln.tokenize(model, prompt)
        batch = (kiln_token * len(tokens))(*tokens)
        kiln.check(lib.kiln_decode(ctx, batch, None, len(tokens)))
        row = len(tokens) - 1
        out = bytearray()
        for step in range(n_predict):
            logits = lib.kiln_logits(ctx, row)
            if not logits:
                kiln.check(1)
            # Greedy: the first token with the largest logit.
            values = logits[:info.n_vocab]
            best = max(range(info.n_vocab), key=values.__getitem__)
            if lib.kiln_token_is_eog(model, best):
                break
            out += kiln.piece(model, best)
            if step + 1 == n_predict:
                break
            one = (kiln_token * 1)(best)
            kiln.check(lib.kiln_decode(ctx, one, None, 1))
            row = 0
        return prompt + out.decode("utf-8", "replace")
    finally:
        lib.kiln_context_free(ctx)
        lib.kiln_model_free(model)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True, help="path of libkiln.so")
    parser.add_argument("-m", "--model", required=True, help="GGUF model")
    parser.add_argument("-p", "--prompt", default="Once upon a time")
    parser.add_argument("-n", "--n-predict", type=int, default=32)
    args = parser.parse_args()
    try:
        print(generate(Kiln(args.lib), args.model, args.prompt, args.n_predict))
    except (KilnError, OSError) as e:
        print(f"python_ctypes.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
