#!/usr/bin/python3
"""Writes the seeds of the prompt cache fuzzer (tests/fuzz/fuzz_prompt_cache.cpp):
files in kiln's --prompt-cache layout (formats/session/prompt_cache.h) for the
fingerprint and cache shape the fuzzer checks against: 2 layers, kv_dim 8,
f16 keys and values (32 bytes per token and layer), context 64, vocabulary 512.

Run: /usr/bin/python3 tests/fuzz/make_prompt_cache_seeds.py
"""
import os
import struct
import zlib

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "prompt_cache")
F16 = 1  # kiln's DType::F16 (engine/core/dtype.h)


def cache_file(tokens, row_bytes=32, layers=2):
    head = b"KILNPCAC" + struct.pack("<IQIIIIIII", 1, 1000, 0x11223344, 0x55667788, F16, F16, layers, 8, len(tokens))
    head += b"".join(struct.pack("<i", t) for t in tokens)
    rows = bytes((i * 7) & 0xFF for i in range(layers * len(tokens) * row_bytes))
    body = head + rows
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def main():
    os.makedirs(FOLDER, exist_ok=True)
    seeds = {"empty": [], "one": [1], "prompt": [1, 403, 407, 261, 378, 87]}
    for name, tokens in seeds.items():
        with open(os.path.join(FOLDER, name + ".cache"), "wb") as f:
            f.write(cache_file(tokens))


if __name__ == "__main__":
    main()
