#!/usr/bin/env python3
"""Writes tests/fixtures/quant_reference.gguf: an independent reference for
kiln's f16, bf16, Q8_0 and Q4_0 conversions (engine/quant/reference.cpp).

Run from anywhere (numpy is the only dependency, torch is not needed):

    /usr/bin/python3 tests/reference/make_quant_fixture.py

The output is deterministic: inputs come from a fixed integer generator (not
numpy's, whose streams may change between releases), and the file is written
byte by byte with struct.pack, so re-running it reproduces the committed file.

The conversions are written here from the format definitions, not translated
from kiln's C++, with every operation in float32 exactly as C does it:
  Q8_0, per block of 32: amax = max |x|; d = amax / 127; id = 1 / d (0 if d == 0);
       store fp16(d); q = roundf(x * id), rounding halves away from zero.
  Q4_0, per block of 32: max = the first element of largest |x|, with its sign;
       d = max / -8; id = 1 / d (0 if d == 0); store fp16(d);
       code = min(15, trunc(x * id + 8.5)) with the product rounded to float32
       before the addition (no fused multiply-add); byte j = code[j] | code[j+16] << 4.
  f16: IEEE binary16, round to nearest even (numpy's astype(float16)).
  bf16: NaN -> upper half with the quiet bit (64) set; else round to nearest even.
The GGUF file holds the float32 input `source` (96 x 13: dims [96, 13], 13 rows of
96), the same data as q8_0 / q4_0 / f16 / bf16 tensors, and the dequantized
blocks q8_0_dequant / q4_0_dequant (float32), plus general.architecture.
"""
import math
import os
import struct

import numpy as np

ROW = 96
ROWS = 13
ALIGN = 32
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "quant_reference.gguf")

F32 = np.float32


class SplitMix64:
    """A tiny deterministic generator (splitmix64): same numbers on every platform."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self, n, lo=-1.0, hi=1.0):
        # 24-bit fractions in float64: every step is exact or correctly rounded.
        return np.array([lo + (hi - lo) * ((self.next() >> 40) / 2.0**24) for _ in range(n)])

    def normal(self, n):
        # Irwin-Hall: a sum of 4 uniforms, centred and scaled to unit variance.
        # Only +, * and sqrt, all correctly rounded by IEEE 754, so every platform
        # gets the same bits (no exp/log/cos whose last bit may vary by libm).
        u = sum(self.uniform(n, 0.0, 1.0) for _ in range(4))
        return (u - 2.0) * math.sqrt(3.0)


# ---- the number formats ---------------------------------------------------------

def fp16_bits(x):
    with np.errstate(over="ignore"):  # overflow to infinity is the intended result
        return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def bf16_bits(x):
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (u >> 16) | 64, rounded).astype(np.uint16)


def roundf(p):
    """C roundf on float32 values: halves away from zero. The float32 value is
    widened exactly to float64, where |p| + 0.5 is exact for every |p| that can
    round to a non-zero integer, so there is no double rounding."""
    p64 = np.asarray(p, dtype=F32).astype(np.float64)
    return np.copysign(np.floor(np.abs(p64) + 0.5), p64)


def q8_0(x):
    blocks, deq = [], []
    for b in np.asarray(x, dtype=F32).reshape(-1, 32):
        amax = F32(0)
        for v in b:
            amax = max(amax, F32(abs(v)))
        d = F32(amax / F32(127))
        inv = F32(F32(1) / d) if d != 0 else F32(0)
        d16 = fp16_bits(d)
        q = roundf(b * inv).astype(np.int8)          # b * inv: a float32 product
        blocks.append(struct.pack("<H", int(d16)) + q.tobytes())
        deq.append(q.astype(F32) * d16.view(np.float16).astype(F32))
    return b"".join(blocks), np.concatenate(deq)


def q4_0(x):
    blocks, deq = [], []
    for b in np.asarray(x, dtype=F32).reshape(-1, 32):
        amax, vmax = F32(0), F32(0)
        for v in b:
            if amax < abs(v):                          # strictly: the first one wins
                amax, vmax = F32(abs(v)), v
        d = F32(vmax / F32(-8))
        inv = F32(F32(1) / d) if d != 0 else F32(0)
        d16 = fp16_bits(d)
        shifted = (b * inv).astype(F32) + F32(8.5)    # two float32 roundings
        code = np.minimum(15, np.trunc(shifted.astype(np.float64))).astype(np.uint8)
        packed = (code[:16] | (code[16:] << 4)).astype(np.uint8)
        blocks.append(struct.pack("<H", int(d16)) + packed.tobytes())
        deq.append((code.astype(np.int32) - 8).astype(F32) * d16.view(np.float16).astype(F32))
    return b"".join(blocks), np.concatenate(deq)


def count_trap_hits(x):
    """How many codes would change if the product were not rounded to float32
    first: for Q4_0 with a fused multiply-add, for Q8_0 when rounding the exact
    product. The fixture is only useful if these are non-zero."""
    q4_hits = q8_hits = 0
    for b in np.asarray(x, dtype=F32).reshape(-1, 32):
        amax, vmax = F32(0), F32(0)
        for v in b:
            if amax < abs(v):
                amax, vmax = F32(abs(v)), v
        d4 = F32(vmax / F32(-8))
        d8 = F32(amax / F32(127))
        if d4 == 0 or d8 == 0:
            continue
        inv4, inv8 = F32(F32(1) / d4), F32(F32(1) / d8)
        exact4 = b.astype(np.float64) * float(inv4)
        fused = np.trunc((exact4 + 8.5).astype(F32).astype(np.float64))
        separate = np.trunc(((b * inv4).astype(F32) + F32(8.5)).astype(np.float64))
        q4_hits += int(np.sum(np.minimum(15, fused) != np.minimum(15, separate)))
        exact8 = b.astype(np.float64) * float(inv8)
        q8_hits += int(np.sum(np.copysign(np.floor(np.abs(exact8) + 0.5), exact8) != roundf(b * inv8)))
    return q4_hits, q8_hits


def check_roundings(x):
    """Cross-check the two 16-bit roundings against nearest-even found by exact
    comparison in float64 (finite inputs below the overflow thresholds)."""
    x64 = np.asarray(x, dtype=F32).astype(np.float64)
    h = fp16_bits(x).view(np.float16).astype(np.float64)
    for v, got in zip(x64, h):
        if abs(v) >= 65520.0:
            assert math.isinf(got), v
            continue
        quantum = 2.0 ** max(math.frexp(v)[1] - 11, -24) if v != 0 else 2.0**-24
        assert got == round(v / quantum) * quantum, (v, got)  # round(): ties to even
    b = (bf16_bits(x).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    for v, got in zip(x64, b):
        quantum = 2.0 ** max(math.frexp(v)[1] - 8, -133) if v != 0 else 1.0  # -133: subnormals
        assert got == round(v / quantum) * quantum, (v, got)


# ---- inputs ---------------------------------------------------------------------

def f32_neighbours(x, k):
    """x and the k float32 values either side of it."""
    out, up, down = [F32(x)], F32(x), F32(x)
    for _ in range(k):
        up, down = np.nextafter(up, F32(np.inf)), np.nextafter(down, F32(-np.inf))
        out += [up, down]
    return out


def q4_fma_traps(candidates, count):
    """A block maximum (the first of `candidates` that has `count` of them) and
    elements for its Q4_0 block where fl(x * id) is exactly m - 8.5 (so adding 8.5
    gives the integer m) while the exact product lies below it, far enough that a
    fused multiply-add would round the sum below m: code m - 1 instead of m.
    Only m <= 4 qualify (beyond that the sum's ulp exceeds the product's), and
    whether a float32 x hits such a product depends on id, hence the search."""
    for vmax in candidates:
        d = F32(F32(vmax) / F32(-8))
        inv = F32(F32(1) / d)
        found = []
        for m in (1, 2, 3, 4):
            target = F32(m - 8.5)
            for x in f32_neighbours(target / inv, 40):
                exact = float(x) * float(inv)            # exact: 24 + 24 bits < 53
                fused = F32(exact + 8.5)                 # exact sum in float64, one rounding
                if abs(x) < abs(vmax) and F32(exact) == target and math.trunc(float(fused)) != m:
                    found.append(x)
                    break
        if len(found) >= count:
            return F32(vmax), found[:count]
    raise AssertionError(f"no Q4_0 trap block among {candidates}")


def q8_double_rounding_traps(amax, count):
    """Elements for a Q8_0 block with max |x| = amax where fl(x * id) is exactly
    k + 0.5 but the exact product is nearer zero: roundf of the float32 product
    gives k + 1, rounding the exact product would give k."""
    d = F32(F32(amax) / F32(127))
    inv = F32(F32(1) / d)
    found = []
    for k in range(3, 120, 7):
        for sign in (1, -1):
            target = F32(sign * (k + 0.5))
            for x in f32_neighbours(target / inv, 40):
                exact = float(x) * float(inv)
                if abs(x) < amax and F32(exact) == target and abs(exact) < k + 0.5:
                    found.append(x)
                    break
    assert len(found) >= count, (amax, found)
    return found[:count]


def q8_division_traps(candidates, count):
    """A block maximum and elements whose Q8_0 codes differ when d = amax / 127 is
    computed as amax * (1 / 127) (what -ffast-math's reciprocal rewrite does):
    the two d differ by an ulp, and so do the ids, which moves these products
    across a k + 0.5 boundary."""
    for amax in candidates:
        amax = F32(amax)
        inv_div = F32(F32(1) / F32(amax / F32(127)))
        inv_mul = F32(F32(1) / F32(amax * F32(F32(1) / F32(127))))
        if inv_div == inv_mul:
            continue
        found = []
        for k in range(20, 127, 3):
            for x in f32_neighbours(F32(k + 0.5) / inv_div, 40):
                if abs(x) < amax and roundf(x * inv_div) != roundf(x * inv_mul):
                    found.append(x)
                    break
        if len(found) >= count:
            return amax, found[:count]
    raise AssertionError("no Q8_0 division trap block")


def fp16_midpoint(h):
    """The value exactly halfway between f16 patterns h and h + 1 (positive, finite);
    with 12 significant bits it is exact in float32."""
    lo, hi = np.array([h, h + 1], dtype=np.uint16).view(np.float16).astype(np.float64)
    return (lo + hi) / 2


def make_source():
    rng = SplitMix64(20240611)
    rows = []

    # 0, 1: weights-like data, normal and uniform, with one heavy-tailed block.
    rows.append(rng.normal(ROW))
    r = 0.05 * rng.uniform(ROW)
    r[64:] = rng.normal(32) ** 3
    rows.append(r)

    # 2: a zero block, a lone positive spike, a lone negative spike in small noise.
    r = np.zeros(ROW)
    r[32 + 5] = 3.7
    r[64:] = 1e-2 * rng.uniform(32)
    r[64 + 20] = -250.0
    rows.append(r)

    # 3: exact ties. Block 0: max |x| 127 gives d = 1 (Q8_0 codes are round(x)).
    # Block 1: max -8 gives Q4_0 d = 1, so x = k +- 0.5 lands on integers after +8.5.
    # Block 2: amax 15.875 gives Q8_0 d = 1/8 exactly, ties at (k + 0.5) / 8.
    halves = np.array([0.5, 1.5, 2.5, 3.5, 10.5, 63.5, 100.5, 126.5])
    b0 = np.concatenate([[-127.0], halves, -halves, [0.49999997, -0.49999997], rng.uniform(13, -100, 100)])
    b1 = np.concatenate([[-8.0, 8.0], np.arange(-7.5, 8.0, 1.0), np.arange(-7.0, 7.0, 1.0)])
    b2 = np.concatenate([[15.875], (np.arange(-20, 11) + 0.5) / 8.0])
    rows.append(np.concatenate([b0, b1, b2]))

    # 4: float32-rounding traps (see the trap functions above), padded with noise.
    vmax, t4 = q4_fma_traps([-6.3 - 0.01 * i for i in range(20)], 2)
    b0 = np.concatenate([[vmax], t4, rng.uniform(29, -4.0, 4.0)])
    b1 = np.concatenate([[100.37], q8_double_rounding_traps(100.37, 16), rng.uniform(15, -50.0, 50.0)])
    vmax, t4 = q4_fma_traps([0.7 + 0.01 * i for i in range(20)], 3)
    b2 = np.concatenate([[vmax], t4, q8_double_rounding_traps(vmax, 8), 0.3 * rng.uniform(20)])
    rows.append(np.concatenate([b0, b1, b2]))

    # 5: negative maxima and equal magnitudes of both signs (first one wins).
    b0 = 4.0 * rng.uniform(32)
    b0[7] = -5.5
    b1 = 2.0 * rng.uniform(32)
    b1[2], b1[20] = 3.0, -3.0
    b2 = 2.0 * rng.uniform(32)
    b2[1], b2[30] = -3.0, 3.0
    rows.append(np.concatenate([b0, b1, b2]))

    # 6: tiny values. d underflows fp16 to 0 (1e-30), is an fp16 subnormal
    # (3e-5), or is near 2^-25 (1e-6); a float32 subnormal rides along with
    # normal values. (A block whose every value is below ~4e-37 is left out:
    # 1 / d overflows there and ggml's float-to-int cast is undefined.)
    b0 = 1e-30 * rng.normal(32)
    b1 = 1e-6 * rng.normal(32)
    b2 = 3e-5 * rng.normal(32)
    b2[3] = 1e-40
    rows.append(np.concatenate([b0, b1, b2]))

    # 7: large values: ~1e4, and f16 overflow at and around 65520.
    b2 = 1e3 * rng.uniform(32)
    b2[:6] = [65504.0, 65519.0, 65520.0, -65520.0, 7e4, -1e5]
    rows.append(np.concatenate([1e4 * rng.normal(64), b2]))

    # 8: halfway cases. Blocks 0-1: midpoints between neighbouring f16 values
    # (normal and subnormal), with the float32 values either side of a few.
    # Block 2: floats whose low 16 bits are 0x8000, ties for bf16.
    mids = []
    for i in range(64):
        h = int(rng.next() % 0x7BFF) if i % 4 else int(rng.next() % 0x400)   # some subnormal
        mid = F32(fp16_midpoint(h))
        mids.append(-mid if rng.next() & 1 else mid)
    for i in range(0, 64, 8):
        mids[i + 1] = np.nextafter(mids[i], F32(np.inf))
        mids[i + 2] = np.nextafter(mids[i], F32(-np.inf))
    ties = [((rng.next() & 0xBFFF_0000) | 0x3000_0000 | 0x8000) for _ in range(32)]
    ties = np.array(ties, dtype=np.uint32).view(np.float32)
    rows.append(np.concatenate([np.array(mids, dtype=F32), ties]))

    # 9-11: more weight-like rows at different scales.
    for scale in (0.02, 3.0, 1e3):
        rows.append(scale * rng.normal(ROW))

    # 12: scales that are hard to get right. Block 0: division traps (above).
    # Block 1: amax = 127 * m with m halfway between f16 0x2e65 (odd) and 0x2e66,
    # so d = m exactly and fp16(d) is a tie, to even 0x2e66. Block 2: Q4_0's
    # d = max / -8 = -m' exactly, m' halfway between 0x3122 (even) and 0x3123: a
    # tie to even 0xb122.
    amax, t = q8_division_traps([100.0 + 0.37 * i for i in range(40)], 12)
    b0 = np.concatenate([[amax], t, rng.uniform(19, -50.0, 50.0)])
    b1 = 100.0 * rng.uniform(32) * fp16_midpoint(0x2E65)
    b1[9] = 127 * fp16_midpoint(0x2E65)
    b2 = 7.0 * rng.uniform(32) * fp16_midpoint(0x3122)
    b2[0] = 8 * fp16_midpoint(0x3122)
    rows.append(np.concatenate([b0, b1, b2]))

    source = np.concatenate([np.asarray(r, dtype=np.float64) for r in rows]).astype(F32)
    assert source.shape == (ROW * ROWS,) and np.all(np.isfinite(source))
    return source


# ---- a minimal GGUF v3 writer ---------------------------------------------------

GGUF_STRING = 8
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30}


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def pad(n):
    return (ALIGN - n % ALIGN) % ALIGN


def write_gguf(path, metadata, tensors):
    """tensors: list of (name, ggml type name, dims, bytes)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata:
        head += gguf_str(key) + struct.pack("<I", GGUF_STRING) + gguf_str(value)
    data, offsets = b"", []
    for _, _, _, blob in tensors:
        offsets.append(len(data))
        data += blob + b"\0" * pad(len(blob))
    for (name, type_name, dims, _), offset in zip(tensors, offsets):
        head += gguf_str(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", GGML_TYPES[type_name], offset)
    blob = head + b"\0" * pad(len(head)) + data
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, path)
    return len(blob)


def main():
    source = make_source()
    check_roundings(source)
    q4_hits, q8_hits = count_trap_hits(source)
    assert q4_hits >= 5 and q8_hits >= 24, (q4_hits, q8_hits)
    q8, q8_deq = q8_0(source)
    q4, q4_deq = q4_0(source)
    dims = [ROW, ROWS]
    tensors = [
        ("source", "f32", dims, source.tobytes()),
        ("q8_0", "q8_0", dims, q8),
        ("q4_0", "q4_0", dims, q4),
        ("f16", "f16", dims, fp16_bits(source).tobytes()),
        ("bf16", "bf16", dims, bf16_bits(source).tobytes()),
        ("q8_0_dequant", "f32", dims, q8_deq.astype(F32).tobytes()),
        ("q4_0_dequant", "f32", dims, q4_deq.astype(F32).tobytes()),
    ]
    assert len(q8) == ROW * ROWS // 32 * 34 and len(q4) == ROW * ROWS // 32 * 18
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    size = write_gguf(OUT, [("general.architecture", "kiln-fixture")], tensors)
    assert size < 64 * 1024, size
    print(f"wrote {os.path.normpath(OUT)} ({size} bytes); codes that a fused multiply-add "
          f"would change: {q4_hits} (Q4_0), that rounding the exact product would change: {q8_hits} (Q8_0)")


if __name__ == "__main__":
    main()
