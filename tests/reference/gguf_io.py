#!/usr/bin/env python3
"""A minimal GGUF v2/v3 reader and writer for the reference scripts (numpy only).

Written from the GGUF format description, independently of kiln's C++ reader:

    u32 magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
    kv_count x (string key, u32 value_type, value)
    tensor_count x (string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset)
    zero padding to `general.alignment` (default 32), then the data section;
    each tensor's offset is relative to the data section start and aligned.

    string = u64 byte length + UTF-8 bytes (no terminator)
    array  = u32 element type + u64 count + elements (arrays may nest)

Reading: `read_gguf(path)` returns a GGUFFile with `.version`, `.metadata` (dict
key -> python value; arrays become lists), `.metadata_types` (key -> value type),
`.tensor_infos` (name -> TensorInfo) and `.tensors` (name -> numpy array) for
the types F32 (0), F16 (1), BF16 (30) [returned as float32 for BF16, float16 for
F16] and I32 (26). Dimensions are reversed: ggml dims [ne0, ne1] become the numpy
shape (ne1, ne0), so a row of ne0 contiguous elements is a numpy row.

Writing: `write_gguf(path, metadata, tensors)` where metadata is a list of
(key, value_type, value) triples (for arrays value_type is (ARRAY, elem_type))
and tensors a list of (name, numpy array) with dtype float32 (written F32) or
int32 (written I32). A numpy shape (a, b) is written as ggml dims [b, a]. Data is
aligned to 32 bytes with zero padding (also after the last tensor). The output is
a pure function of the inputs (deterministic bytes).
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)

_SCALAR_FMT = {
    UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
    FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d",
}

# ggml tensor types handled here
GGML_F32, GGML_F16, GGML_I32, GGML_BF16 = 0, 1, 26, 30

DEFAULT_ALIGNMENT = 32


class GGUFError(Exception):
    pass


class TensorInfo:
    def __init__(self, name, dims, ggml_type, offset):
        self.name = name
        self.dims = dims          # ggml order: dims[0] = ne0 (contiguous)
        self.ggml_type = ggml_type
        self.offset = offset      # relative to the data section

    def __repr__(self):
        return "TensorInfo(%r, dims=%r, type=%d, offset=%d)" % (self.name, self.dims, self.ggml_type, self.offset)


class GGUFFile:
    def __init__(self):
        self.version = 0
        self.metadata = {}
        self.metadata_types = {}
        self.tensor_infos = {}
        self.tensors = {}
        self.alignment = DEFAULT_ALIGNMENT
        self.data_offset = 0


class _Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError("truncated file: need %d bytes at offset %d, file has %d" % (n, self.pos, len(self.buf)))
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def string(self):
        n = self.unpack("<Q")
        return bytes(self.take(n)).decode("utf-8", errors="surrogateescape")

    def value(self, vtype, depth=0):
        if vtype in _SCALAR_FMT:
            return self.unpack(_SCALAR_FMT[vtype])
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            if depth > 16:
                raise GGUFError("arrays nested too deeply")
            etype = self.unpack("<I")
            count = self.unpack("<Q")
            if etype in _SCALAR_FMT:
                size = struct.calcsize(_SCALAR_FMT[etype])
                raw = self.take(size * count)
                return list(struct.unpack("<%d%s" % (count, _SCALAR_FMT[etype][1]), raw))
            return [self.value(etype, depth + 1) for _ in range(count)]
        raise GGUFError("unknown metadata value type %d at offset %d" % (vtype, self.pos))


def read_gguf(path, load_tensors=True):
    with open(path, "rb") as f:
        buf = f.read()
    cur = _Cursor(memoryview(buf))
    out = GGUFFile()
    if bytes(cur.take(4)) != GGUF_MAGIC:
        raise GGUFError("%s: not a GGUF file (bad magic)" % path)
    out.version = cur.unpack("<I")
    if out.version not in (2, 3):
        raise GGUFError("%s: unsupported GGUF version %d (expected 2 or 3)" % (path, out.version))
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    for _ in range(n_kv):
        key = cur.string()
        vtype = cur.unpack("<I")
        if vtype == ARRAY:
            # remember the element type too, peeking before the value is decoded
            etype = struct.unpack_from("<I", buf, cur.pos)[0]
            out.metadata_types[key] = (ARRAY, etype)
        else:
            out.metadata_types[key] = vtype
        out.metadata[key] = cur.value(vtype)
    order = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("<I")
        if n_dims > 4:
            raise GGUFError("tensor %s has %d dims (max 4)" % (name, n_dims))
        dims = [cur.unpack("<Q") for _ in range(n_dims)]
        ttype = cur.unpack("<I")
        offset = cur.unpack("<Q")
        out.tensor_infos[name] = TensorInfo(name, dims, ttype, offset)
        order.append(name)
    out.alignment = int(out.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    if out.alignment <= 0 or out.alignment & (out.alignment - 1):
        raise GGUFError("general.alignment %d is not a power of two" % out.alignment)
    out.data_offset = (cur.pos + out.alignment - 1) // out.alignment * out.alignment
    if not load_tensors:
        return out
    for name in order:
        info = out.tensor_infos[name]
        n = 1
        for d in info.dims:
            n *= d
        if info.ggml_type == GGML_F32:
            dtype, esize = np.dtype("<f4"), 4
        elif info.ggml_type == GGML_F16:
            dtype, esize = np.dtype("<f2"), 2
        elif info.ggml_type == GGML_I32:
            dtype, esize = np.dtype("<i4"), 4
        elif info.ggml_type == GGML_BF16:
            dtype, esize = np.dtype("<u2"), 2
        else:
            continue  # quantized types are not decoded here
        start = out.data_offset + info.offset
        if start + n * esize > len(buf):
            raise GGUFError("tensor %s data runs past the end of the file" % name)
        arr = np.frombuffer(buf, dtype=dtype, count=n, offset=start).copy()
        if info.ggml_type == GGML_BF16:
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        shape = tuple(reversed(info.dims)) if info.dims else ()
        out.tensors[name] = arr.reshape(shape)
    return out


# ---------------------------------------------------------------- writer

def _pack_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value):
    if isinstance(vtype, tuple):
        kind, etype = vtype
        if kind != ARRAY:
            raise GGUFError("bad value type %r" % (vtype,))
        parts = [struct.pack("<IQ", etype if not isinstance(etype, tuple) else ARRAY, len(value))]
        for v in value:
            parts.append(_pack_value(etype, v))
        return b"".join(parts)
    if vtype in _SCALAR_FMT:
        return struct.pack(_SCALAR_FMT[vtype], value)
    if vtype == STRING:
        return _pack_string(value)
    raise GGUFError("cannot write value type %r" % (vtype,))


def _pad(n, align):
    return (align - n % align) % align


def write_gguf(path, metadata, tensors, alignment=DEFAULT_ALIGNMENT):
    """metadata: [(key, vtype, value)]; tensors: [(name, np.ndarray float32|int32)]."""
    head = [GGUF_MAGIC, struct.pack("<IQQ", 3, len(tensors), len(metadata))]
    for key, vtype, value in metadata:
        head.append(_pack_string(key))
        head.append(struct.pack("<I", ARRAY if isinstance(vtype, tuple) else vtype))
        head.append(_pack_value(vtype, value))
    blobs = []
    offset = 0
    for name, arr in tensors:
        arr = np.asarray(arr)
        if arr.dtype == np.float32:
            ttype, data = GGML_F32, np.ascontiguousarray(arr, dtype="<f4").tobytes()
        elif arr.dtype == np.int32:
            ttype, data = GGML_I32, np.ascontiguousarray(arr, dtype="<i4").tobytes()
        else:
            raise GGUFError("tensor %s: dtype %s not supported (float32 or int32)" % (name, arr.dtype))
        if arr.ndim < 1 or arr.ndim > 4:
            raise GGUFError("tensor %s: %d dims (1..4)" % (name, arr.ndim))
        dims = list(reversed(arr.shape))
        head.append(_pack_string(name))
        head.append(struct.pack("<I", len(dims)))
        head.append(struct.pack("<%dQ" % len(dims), *dims))
        head.append(struct.pack("<IQ", ttype, offset))
        blobs.append(data + b"\0" * _pad(len(data), alignment))
        offset += len(blobs[-1])
    header = b"".join(head)
    header += b"\0" * _pad(len(header), alignment)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)
