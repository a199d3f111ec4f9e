#!/usr/bin/env python3
r"""Writes tests/fixtures/tokenizer/gpt2*.{txt,gguf}: expected results of kiln's
GPT-2 byte-level BPE tokenizer (formats/tokenizer/gpt2_tokenizer.cpp):
  gpt2.txt                  ids on ../shared/models/vocab/ggml-vocab-gpt-2.gguf
  gpt2_tinyshakespeare.txt  ids of the first 65536 bytes of ../shared/data/tinyshakespeare.txt
  gpt2_pretokens.txt        the pre-tokenizer's pieces (their byte lengths) for
                            the texts of gpt2.txt
  gpt2_tiny.gguf/.txt       a hand-made vocabulary whose merges test the rules
                            (later pairs outranking earlier ones, a pair listed
                            twice, ties) and its ids

    /usr/bin/python3 tests/reference/gpt2_bpe_reference.py

Needs the `regex` module (Debian: python3-regex), as OpenAI's encoder.py does.
The vocabulary and merges are read from the GGUF file with gguf_io.py (not
kiln's reader). The algorithm is the published one (GPT-2's encoder.py),
written out plainly here:

  1. bytes_to_unicode(): the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' stand
     for themselves, the other 68 bytes for U+0100, U+0101, ... in byte order;
  2. the text is cut with the pattern
        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
     by regex.findall;
  3. each piece's UTF-8 bytes become byte-level characters; then, repeatedly,
     the adjacent pair with the lowest merge rank (its index in
     tokenizer.ggml.merges, via a dict, so a repeated pair takes its later
     index) is merged at every occurrence, left to right, until no pair has a
     rank;
  4. each resulting string's id is its index in tokenizer.ggml.tokens.
No BOS is added (tokenizer.ggml.add_bos_token is absent: GPT-2 adds none).

Bytes that are not valid UTF-8 are decoded with errors="surrogateescape", so
each bad byte is a lone surrogate (general category Cs: neither letter, number
nor whitespace) and encodes back to that byte: kiln's documented behaviour.

kiln's character classes come from Python's unicodedata (Unicode 14.0.0 on
Debian 12), the `regex` module has its own (Unicode 15.0 in Debian 12's
python3-regex); the script checks that the two agree on every character of
every case, so the fixture does not depend on the difference.

Fixture format (the one of spm_reference.py, whose escape() is reused), one
case per line, '#' lines are comments:
    "<escaped text>"<TAB><ids of encode(text, add_bos=false), space-separated>
gpt2_pretokens.txt and gpt2_tiny.txt have the same format, with piece byte
lengths in place of ids (gpt2_pretokens.txt) or ids with the tiny vocabulary
(gpt2_tiny.txt). gpt2_tinyshakespeare.txt holds its ids space-separated on
one line.

Before writing, the script checks itself against published GPT-2 ids
("Hello world" is 15496 995, "hello world" 31373 995) and stops if they differ.
Re-running it reproduces the committed fixtures byte for byte.
"""
import os
import random
import sys
import unicodedata

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
from spm_reference import escape  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
VOCAB = os.path.join(SHARED, "models", "vocab", "ggml-vocab-gpt-2.gguf")
SHAKESPEARE = os.path.join(SHARED, "data", "tinyshakespeare.txt")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "tokenizer")

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class Gpt2Bpe:
    def __init__(self, path):
        meta = gguf_io.read_gguf(path, load_tensors=False).metadata
        assert meta["tokenizer.ggml.model"] == "gpt2"
        self.tokens = meta["tokenizer.ggml.tokens"]
        self.encoder = {}
        for i, t in enumerate(self.tokens):
            self.encoder.setdefault(t, i)
        merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
        self.ranks = dict(zip(merges, range(len(merges))))
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def encode(self, data):
        text = data.decode("utf-8", errors="surrogateescape")
        ids = []
        for piece in PATTERN.findall(text):
            raw = piece.encode("utf-8", errors="surrogateescape")
            ids.extend(self.encoder[s] for s in self.bpe("".join(self.byte_encoder[b] for b in raw)))
        return ids

    def decode(self, ids):
        return bytes(self.byte_decoder[c] for i in ids for c in self.tokens[i])


def check_classes_agree(data):
    """kiln's tables (unicodedata) and the regex module must classify alike."""
    for ch in data.decode("utf-8", errors="surrogateescape"):
        category = unicodedata.category(ch)
        ours = "L" if category[0] == "L" else "N" if category[0] == "N" else None
        if ours is None and (category in ("Zs", "Zl", "Zp") or ch in "\t\n\x0b\x0c\r\x85"):
            ours = "s"
        theirs = ("L" if regex.match(r"\p{L}", ch) else "N" if regex.match(r"\p{N}", ch)
                  else "s" if regex.match(r"\s", ch) else None)
        assert ours == theirs, "U+%04X: unicodedata says %s, regex %s" % (ord(ch), ours, theirs)


def shakespeare(n):
    with open(SHAKESPEARE, "rb") as f:
        return f.read(n)


CASES = [
    "",
    "Hello world",
    "hello world",
    " ",
    "   ",
    "a",
    " a",
    "  a",
    "a ",
    "a  ",
    "hello   world",
    "trailing spaces   ",
    "\t",
    "tab\tseparated\t\tvalues",
    "\n",
    "\n\n",
    "line one\nline two\n\nline four\n",
    "  \n  indented\n\tand tabbed",
    "mixed \t \n whitespace \r\n runs",
    "12345",
    "3.14159 and 1,000,000 and 2024-01-31",
    " 42 is the answer, 7x6",
    "Hello, world! How are you? (Fine.) [ok] {yes} <no>",
    "...!!!???---***",
    "a+b=c; x*y/z % 2 @home #tag $5 ^_^ ~tilde `code` |pipe| \\slash",
    "it's, don't, we're, they've, I'm, we'll, he'd",
    "IT'S, DON'T, WE'LL, YOU'VE, I'M, SHE'D, THEY'RE",
    "the cat's 've 'll 're 's 't 'm 'd 'x ''s '''",
    "rock 'n' roll, 'quoted' and ’curly’ apostrophes",
    "MiXeD CaSe WoRdS and camelCaseIdentifiers",
    "café naïve résumé Ångström",
    "e\u0301 decomposed accent",
    "日本語のテキスト、句読点。",
    "中文文本，标点符号！",
    "Привет, мир! Ёжик в тумане",
    "مرحبا بالعالم ١٢٣",
    "שלום עולם",
    "Ελληνικά κείμενα",
    "हिन्दी पाठ",
    "한국어 텍스트",
    "🦙 llamas 🎉👍🏽",
    "family: 👨‍👩‍👧‍👦 and flag 🏳️‍🌈 and 🇫🇷",
    "emoji😀glued😀to😀words",
    "non\u00a0breaking\u3000ideographic\u2028line\u2029para\u0085nel\u000bvt\u000cff",
    "file\u001cseparator\u001fand\u007fdel\u0000nul",
    "superscript² fraction½ roman Ⅻ circled①",
    "<|endoftext|> stays text",
    "a" * 300,
    " " * 40 + "x",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "https://example.com/path?query=1&b=2#frag",
    "def f(x):\n    return x ** 2  # square\n",
]

BYTE_CASES = [
    b"\xff\xfe invalid \xc3( lead \xe2\x82 cut \xed\xa0\x80 surrogate \xc0\xaf overlong",
    b"ends with a cut character \xf0\x9f\xa6",
    b"\x80\x80 words\xff\xffglued \xfe",
]

# Seeded random strings from a pool of awkward characters: the pre-tokenizer's
# alternatives meeting each other in every order.
POOL = list("ab Z9 ''sltmdrevq.,!?-\t\n\r") + ["  ", "   ", "\u00a0", "é", "日", "Я", "٣", "²", "\u0301", "😀", "\u200d",
                                                 "’", "\u3000", "\x0b", "\x1c"]


def random_cases(count, seed=20240601):
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 30))) for _ in range(count)]


def write_lines(name, header, rows):
    path = os.path.join(FIXTURES, name)
    lines = ["# " + header, "# Written by tests/reference/gpt2_bpe_reference.py (see there for the format); "
             "do not edit by hand."]
    lines += ['"%s"\t%s' % (escape(data), " ".join(str(v) for v in values)) for data, values in rows]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (path, len(rows)))


def pretoken_lengths(data):
    text = data.decode("utf-8", errors="surrogateescape")
    return [len(p.encode("utf-8", errors="surrogateescape")) for p in PATTERN.findall(text)]


# The hand-made vocabulary: the 256 byte characters (ids 0..255 in the order of
# bytes_to_unicode, as GPT-2 has them), then merged tokens, then a control token.
# Merge 0 uses "ab", which only merge 1 makes: encoder.py merges every "a b"
# first ("abab" is "ab" "ab", never "aba" "b"). "c d" is listed at ranks 2 and
# 5: the later rank counts, so "d e" (rank 3) goes first in "cde".
TINY_MERGED = ["ab", "aba", "cd", "de", "aa", "\u0120a", "aaa", "aaaa"]
TINY_MERGES = ["ab a", "a b", "c d", "d e", "a a", "c d", "\u0120 a", "aa a", "aa aa"]
TINY_TEXTS = ["", "abab", "aba", "ababa", "cde", "ccdde", "aaa", "aaaa", "aaaaa", " a a", "abcde ab",
              "<|endoftext|>", "x\ny"]


def write_tiny_vocab():
    byte_chars = bytes_to_unicode()
    tokens = [byte_chars[b] for b in sorted(byte_chars, key=lambda b: ord(byte_chars[b]))]
    tokens += TINY_MERGED + ["<|endoftext|>"]
    types = [1] * (len(tokens) - 1) + [3]
    eot = len(tokens) - 1
    path = os.path.join(FIXTURES, "gpt2_tiny.gguf")
    gguf_io.write_gguf(path, [
        ("general.architecture", gguf_io.STRING, "gpt2"),
        ("tokenizer.ggml.model", gguf_io.STRING, "gpt2"),
        ("tokenizer.ggml.tokens", (gguf_io.ARRAY, gguf_io.STRING), tokens),
        ("tokenizer.ggml.token_type", (gguf_io.ARRAY, gguf_io.INT32), types),
        ("tokenizer.ggml.merges", (gguf_io.ARRAY, gguf_io.STRING), TINY_MERGES),
        ("tokenizer.ggml.bos_token_id", gguf_io.UINT32, eot),
        ("tokenizer.ggml.eos_token_id", gguf_io.UINT32, eot),
    ], [])
    print("wrote %s (%d tokens, %d merges)" % (path, len(tokens), len(TINY_MERGES)))
    bpe = Gpt2Bpe(path)
    rows = []
    for text in TINY_TEXTS:
        data = text.encode("utf-8")
        ids = bpe.encode(data)
        assert bpe.decode(ids) == data
        rows.append((data, ids))
    write_lines("gpt2_tiny.txt", "Expected ids for kiln's GPT-2 tokenizer on gpt2_tiny.gguf beside this file (no BOS).", rows)


def main():
    bpe = Gpt2Bpe(VOCAB)
    published = [("Hello world", [15496, 995]), ("hello world", [31373, 995])]
    for text, ids in published:
        got = bpe.encode(text.encode("utf-8"))
        assert got == ids, "%r gives %s, but GPT-2 gives %s" % (text, got, ids)

    paragraph = shakespeare(600)
    datas = [t.encode("utf-8") for t in CASES] + BYTE_CASES + [paragraph]
    datas += [t.encode("utf-8") for t in random_cases(40)]
    lines = [
        "# Expected ids for kiln's GPT-2 tokenizer on ../shared/models/vocab/ggml-vocab-gpt-2.gguf (no BOS).",
        "# Written by tests/reference/gpt2_bpe_reference.py (see there for the format); do not edit by hand.",
    ]
    for data in datas:
        check_classes_agree(data)
        ids = bpe.encode(data)
        assert bpe.decode(ids) == data
        lines.append('"%s"\t%s' % (escape(data), " ".join(str(i) for i in ids)))
    os.makedirs(FIXTURES, exist_ok=True)
    path = os.path.join(FIXTURES, "gpt2.txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (path, len(datas)))

    write_lines("gpt2_pretokens.txt", "The byte lengths of the pieces GPT-2's pre-tokenization pattern cuts each text into.",
                [(data, pretoken_lengths(data)) for data in datas])
    write_tiny_vocab()

    data = shakespeare(65536)
    check_classes_agree(data)
    ids = bpe.encode(data)
    assert bpe.decode(ids) == data
    path = os.path.join(FIXTURES, "gpt2_tinyshakespeare.txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")
    print("wrote %s (%d ids for 65536 bytes)" % (path, len(ids)))


if __name__ == "__main__":
    main()
