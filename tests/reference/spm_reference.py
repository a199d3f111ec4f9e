#!/usr/bin/env python3
r"""Writes tests/fixtures/tokenizer/llama-spm.txt and stories260K.txt: expected
token ids for kiln's SentencePiece-style tokenizer (formats/tokenizer/spm_tokenizer.cpp).

How it was run (plain Python 3, no third-party modules; the models sit beside the
repository in ../shared/models):

    /usr/bin/python3 tests/reference/spm_reference.py

It reads the vocabulary straight from the GGUF files with its own small reader
(not kiln's) and implements the published SentencePiece BPE encoding in the
simplest way there is, so that it can be checked by eye rather than trusted:

  1. Every space becomes U+2581 "▁"; one "▁" is put in front of non-empty text
     (tokenizer.ggml.add_space_prefix, default true).
  2. The text is cut into UTF-8 characters; a byte that does not start a valid
     UTF-8 character is a symbol of its own.
  3. Repeat: look at every adjacent pair of symbols; among pairs whose
     concatenation is a vocabulary piece, merge the one whose piece has the
     highest score (the leftmost on a tie). Stop when no pair is a piece.
     Only normal and user-defined tokens are pieces: control (<s>), unknown,
     unused and byte (<0xNN>) tokens are never the result of a merge.
  4. A symbol that is a piece gives its id; any other symbol gives one byte
     token <0xNN> per byte (or the unknown token if a byte token is missing).
  5. With add_bos, the BOS id goes in front (empty text gives just BOS).

Step 3 rescans the whole sequence after each merge (quadratic): kiln's C++ uses
a priority queue over a linked list instead, so the two are independent.

Fixture format, one case per line, '#' lines are comments:
    "<escaped text>"<TAB><ids of encode(text, add_bos=true), space-separated>
The text is UTF-8 between double quotes; inside them \\, \", \n, \t, \r and
\xNN (any other byte below 0x20, 0x7f, and bytes of invalid UTF-8) are escapes.

Before writing, the script checks itself against published ids (see __main__:
the LLaMA tokenizer's, as llama.cpp's tests list them, and stories260K's
"Once upon a time") and stops if any differ. Re-running it reproduces the
committed fixtures byte for byte.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
MODELS = os.path.normpath(os.path.join(REPO, "..", "shared", "models"))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "tokenizer")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


# ---------------------------------------------------------------- GGUF reading

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    """Returns the metadata of a GGUF v2/v3 file as a dict; strings stay bytes."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def value(kind):
        nonlocal pos
        if kind == 8:
            n = take("<Q")
            s = data[pos : pos + n]
            pos += n
            return s
        if kind == 9:
            elem = take("<I")
            n = take("<Q")
            return [value(elem) for _ in range(n)]
        return take(SCALARS[kind])

    assert take("<I") == 0x46554747, "not a GGUF file"
    assert take("<I") in (2, 3), "unsupported GGUF version"
    take("<Q")  # tensor count: the tensors are not needed
    kv_count = take("<Q")
    metadata = {}
    for _ in range(kv_count):
        key = value(8).decode("utf-8")
        metadata[key] = value(take("<I"))
    return metadata


class Vocab:
    def __init__(self, path):
        meta = read_gguf_metadata(path)
        assert meta["tokenizer.ggml.model"] == b"llama"
        self.tokens = meta["tokenizer.ggml.tokens"]
        self.scores = meta["tokenizer.ggml.scores"]
        self.types = meta["tokenizer.ggml.token_type"]
        self.bos = meta["tokenizer.ggml.bos_token_id"]
        self.unk = meta["tokenizer.ggml.unknown_token_id"]
        self.add_space_prefix = meta.get("tokenizer.ggml.add_space_prefix", True)
        # The pieces a merge may produce, and the byte tokens, by their text.
        self.piece_id = {}
        self.byte_id = {}
        for i, (text, kind) in enumerate(zip(self.tokens, self.types)):
            # setdefault: if a text were listed twice, its first id would win.
            if kind in (NORMAL, USER_DEFINED):
                self.piece_id.setdefault(text, i)
            elif kind == BYTE:
                self.byte_id.setdefault(text, i)


# ---------------------------------------------------------------- the algorithm


def utf8_characters(data):
    """Cuts bytes into characters; an invalid byte is a character of its own."""
    chars = []
    i = 0
    while i < len(data):
        length = 1  # when no prefix of 1..4 bytes decodes to one character
        for n in (1, 2, 3, 4):
            try:
                if i + n <= len(data) and len(data[i : i + n].decode("utf-8", errors="strict")) == 1:
                    length = n
                    break
            except UnicodeDecodeError:
                continue  # Python's strict decoder rejects overlongs, surrogates and cut sequences
        chars.append(data[i : i + length])
        i += length
    return chars


def encode(vocab, text, add_bos):
    ids = [vocab.bos] if add_bos else []
    if not text:
        return ids
    if vocab.add_space_prefix:
        text = b" " + text
    text = text.replace(b" ", "\u2581".encode("utf-8"))

    symbols = utf8_characters(text)
    while True:
        best = None  # (score, index)
        for i in range(len(symbols) - 1):
            piece = symbols[i] + symbols[i + 1]
            if piece in vocab.piece_id:
                score = vocab.scores[vocab.piece_id[piece]]
                if best is None or score > best[0]:  # strictly greater: the leftmost wins ties
                    best = (score, i)
        if best is None:
            break
        i = best[1]
        symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]

    for symbol in symbols:
        if symbol in vocab.piece_id:
            ids.append(vocab.piece_id[symbol])
            continue
        byte_tokens = [("<0x%02X>" % b).encode("ascii") for b in symbol]
        if all(t in vocab.byte_id for t in byte_tokens):
            ids.extend(vocab.byte_id[t] for t in byte_tokens)
        else:
            ids.append(vocab.unk)
    return ids


# ---------------------------------------------------------------- test strings

LONG_PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog, and then it runs far away into the forest. "
    "Once upon a time, in a small village by the sea, there lived a little girl named Lily. "
    "She loved to play outside with her friends, building castles in the sand and collecting shells. "
    "One day, she found a shiny stone that glowed in the dark! \"What is this?\" she asked her mother. "
    "Her mother smiled and said, \"It is a magic stone, Lily. Keep it safe, and it will bring you luck.\" "
    "From that day on, Lily carried the stone everywhere she went."
)

# Several lines of verse: newlines between words, empty lines, apostrophes.
VERSE = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n\n"
    "First Citizen:\nFirst, you know Caius Marcius is chief enemy to the people.\n\nAll:\nWe know't, we know't.\n"
)

CASES = [
    "",
    "Hello world",
    " Hello world",
    "Hello  world",
    "Hello world ",
    "   ",
    " ",
    "\n",
    "\n\n\tTabs\tand\nnewlines",
    "1234567890 3.14159",
    "Hello, world! (Really?) [yes]; {no}: 'quoted' \"double\" - dash -- em_dash... #hash @at $5 100% a&b *star* ~tilde~ `tick` ^caret| back\\slash/",
    "MiXeD CaSe WoRdS and ALL CAPS and lowercase",
    "café naïve",
    "Привет мир",
    "日本語のテキスト",
    "한국어",
    "🦙 llamas 🎉👍🏽",
    "Ünïcödé ⁂ ℵ₀ ∑ ∞ ≠ ≤ ≥ ¬ ∀ ∃ ∅ ⊂ ⊃",
    "\x00\x01\x1f\x7f control bytes",
    "<s> and </s> and <unk> and <0x41> typed as text",
    "Once upon a time",
    "Once upon a time, there was a little girl named Lily.",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "        eight leading spaces",
    "trailing spaces        ",
    LONG_PARAGRAPH,
    VERSE,
]

# (text, ids without BOS) published for the LLaMA vocabulary; see __main__.
LLAMA_SPM_PUBLISHED = [
    ("", []),
    (" ", [259]),
    ("  ", [1678]),
    ("   ", [268]),
    ("\t", [29871, 12]),
    ("\n", [29871, 13]),
    ("\t\n", [29871, 12, 13]),
    ("Hello world", [15043, 3186]),
    (" Hello world", [29871, 15043, 3186]),
    ("Hello World", [15043, 2787]),
    (" Hello World", [29871, 15043, 2787]),
    (" Hello World!", [29871, 15043, 2787, 29991]),
    ("Hello, world!", [15043, 29892, 3186, 29991]),
    (" Hello, world!", [29871, 15043, 29892, 3186, 29991]),
    (" this is \U0001f999.cpp", [29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223]),
    ("w048 7tuijk dsdfhu", [281, 29900, 29946, 29947, 29871, 29955, 9161, 13535, 18031, 2176, 6905]),
    ("нещо на Български", [1538, 4851, 665, 1386, 29713, 1305]),
    (
        "កាន់តែពិសេសអាចខលចេញ",
        [29871, 31849, 31324, 31934, 228, 162, 142, 228, 161, 146, 228, 162, 133, 228, 161, 153, 228, 161, 186,
         31708, 228, 162, 132, 31708, 228, 161, 165, 31324, 228, 161, 136, 228, 161, 132, 228, 161, 158, 228,
         161, 136, 228, 162, 132, 228, 161, 140],
    ),
    (
        "\U0001f680 (normal) \U0001f636\u200d\U0001f32b\ufe0f (multiple emojis concatenated) \u2705 (only emoji that has its own token)",
        [29871, 243, 162, 157, 131, 313, 8945, 29897, 29871, 243, 162, 155, 185, 30722, 243, 162, 143, 174, 30598,
         313, 20787, 953, 3848, 275, 16125, 630, 29897, 29871, 31681, 313, 6194, 953, 29877, 2397, 393, 756, 967,
         1914, 5993, 29897],
    ),
    ("Hello", [15043]),
    (" Hello", [29871, 15043]),
    ("  Hello", [259, 15043]),
    ("   Hello", [1678, 15043]),
    ("    Hello", [268, 15043]),
    ("    Hello\n    Hello", [268, 15043, 13, 1678, 15043]),
    (" (", [29871, 313]),
]

# Byte strings that are not valid UTF-8: each invalid byte is its own symbol.
BYTE_CASES = [
    b"\xff\xfe invalid \xc3( lead \xe2\x82 cut \xed\xa0\x80 surrogate \xc0\xaf overlong",
    b"ends with a cut character \xf0\x9f\xa6",
]


def escape(data):
    """The fixture escaping: UTF-8 stays as it is, other bytes become escapes."""
    out = []
    for ch in utf8_characters(data):
        if len(ch) == 1:
            b = ch[0]
            if ch == b"\\":
                out.append("\\\\")
            elif ch == b'"':
                out.append('\\"')
            elif ch == b"\n":
                out.append("\\n")
            elif ch == b"\t":
                out.append("\\t")
            elif ch == b"\r":
                out.append("\\r")
            elif b < 0x20 or b >= 0x7F:
                out.append("\\x%02x" % b)
            else:
                out.append(chr(b))
        else:
            out.append(ch.decode("utf-8"))
    return "".join(out)


def write_fixture(model_file, out_name, expectations):
    vocab = Vocab(os.path.join(MODELS, model_file))
    for text, ids in expectations:
        got = encode(vocab, text.encode("utf-8"), True)
        assert got == ids, f"{model_file}: {text!r} gives {got}, but the published tokenizer gives {ids}"

    lines = [
        f"# Expected ids for kiln's SPM tokenizer on ../shared/models/{model_file}.",
        "# Written by tests/reference/spm_reference.py (see there for the format); do not edit by hand.",
    ]
    texts = CASES + [t for t, _ in LLAMA_SPM_PUBLISHED if t not in CASES]
    for data in [t.encode("utf-8") for t in texts] + BYTE_CASES:
        ids = encode(vocab, data, True)
        lines.append('"%s"\t%s' % (escape(data), " ".join(str(i) for i in ids)))
    os.makedirs(FIXTURES, exist_ok=True)
    path = os.path.join(FIXTURES, out_name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path} ({len(lines) - 2} cases)")


if __name__ == "__main__":
    # Facts from the public LLaMA tokenizer; a reference that disagrees is wrong.
    # The 32000-token vocabulary is LLaMA's own. Besides "Hello world", these
    # expectations are llama.cpp's tests/test-tokenizer-0-llama.cpp for this very
    # file (there generated with the sentencepiece library; BOS added here).
    write_fixture("vocab/ggml-vocab-llama-spm.gguf", "llama-spm.txt", [(t, [1] + ids) for t, ids in LLAMA_SPM_PUBLISHED])
    write_fixture("stories260K.gguf", "stories260K.txt", [("Once upon a time", [1, 403, 407, 261, 378])])
