#!/usr/bin/env python3
"""Writes two fixtures of llama.cpp's llama-tokenize ids for kiln's tests
(tests/test_tokenizer_pretok.cpp).

tests/fixtures/tokenizer_pretok/llama_tokenize.txt: the token ids
llama.cpp's llama-tokenize gives for a set of texts, for every
tokenizer.ggml.pre value of kiln's table (formats/tokenizer/bpe_pretokenizer.cpp),
on GPT-2's vocabulary with only `pre` changed. Most pre types have no vocabulary
file in llama.cpp's models/ folder, so this is how kiln's splitting is checked
against llama.cpp for them (the test: tests/test_tokenizer_pretok.cpp).

    /usr/bin/python3 tests/reference/make_pretok_fixtures.py LLAMA_CPP_DIR [GPT2_VOCAB]

LLAMA_CPP_DIR is a llama.cpp checkout with build/bin/llama-tokenize built;
GPT2_VOCAB defaults to /work/shared/models/vocab/ggml-vocab-gpt-2.gguf (the
file the test reads from the shared models folder). llama-tokenize runs with
--no-bos (kiln's test asks for no BOS) and parses special tokens (its default,
and kiln's).

Output lines: pre<TAB>text<TAB>ids, the text with backslash escapes for \\, tab,
CR, LF and bytes outside printable ASCII written \\xNN (so the file is ASCII).

tests/fixtures/tokenizer_pretok/llama_cpp_models.txt: the ids for the same
texts and a few that spell special tokens, on every vocabulary in llama.cpp's
models/ folder (the test reads those files from KILN_LLAMA_CPP_DIR), with
special tokens parsed and not (--no-parse-special). Lines:
file<TAB>special|literal<TAB>text<TAB>ids. Vocabularies kiln refuses
(bert) are left out.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "tokenizer_pretok", "llama_tokenize.txt")
OUT_MODELS = os.path.join(HERE, "..", "fixtures", "tokenizer_pretok", "llama_cpp_models.txt")

# Texts that spell special tokens of llama.cpp's vocabularies (SentencePiece's
# <s>, Phi-3's chat markers, GPT-2's <|endoftext|>, StarCoder's FIM markers,
# DeepSeek's sentence markers), with spaces around them for the strip rules.
SPECIAL_TEXTS = [
    "<s>Hello</s> world <unk> end",
    "<|user|>\n Hi there <|end|>\n<|assistant|> Hello!<|end|>",
    "a <|endoftext|> b<|endoftext|>c",
    "<fim_prefix>def f():<fim_suffix>\n    return 1<fim_middle>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>Hi<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<|im_start|>user\nhello<|im_end|>",
]

# Every name llama.cpp's llama-vocab.cpp maps (kiln's BpePretokenizer::known_names()).
PRES = [
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe", "deepseek-llm",
    "deepseek-v3", "deepseek-coder", "falcon", "starcoder", "refact", "codeshell", "exaone", "minerva-7b",
    "command-r", "smollm", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
    "jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "qwen2", "deepseek-r1-qwen", "stablelm2",
    "megrez", "poro-chat", "bloom", "gpt3-finnish", "viking", "tekken", "chameleon",
]

TEXTS = [
    "Hello world",
    " Hello World! I'm here, you're there; we'll see.",
    "I'LL DO IT, SHE'S READY, THEY'VE GONE",
    "12345 1234567890 3.14159 1,000,000 x2y34z",
    "   leading spaces and trailing   ",
    "tabs\tand\t\ttabs\nnew\n\nlines\r\nwindows\r\n",
    "\n\n\n",
    " ",
    "你好世界，这是一个测试。日本語のテキスト、カタカナ。한국어 텍스트",
    "emoji 🦙🦙 and 🇺🇸 flags 👍🏽",
    "Ümlaut café naïve Ελληνικά русский текст العربية हिन्दी",
    "code: def f(x):\n    return x**2 + 1  # comment\n",
    "<|endoftext|>special in text<|endoftext|>",
    "punctuation!!! ??? ... --- ~~~ $$$ +++ <<<>>> ^^^ ||| ```",
    "mixed123abc456DEF7890",
    "\u3000ideographic\u00a0nbsp\u2009thin space",
    "Ａｂｃ１２３ fullwidth",
    "<sentinel:12> IMGIMGABCZ text",
    "camelCaseWords and UPPERcase and lowerCASE",
    "invalid \xff\xfe bytes",
]


def escape(data):
    out = []
    for b in data:
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def text_bytes(text):
    # "\xff\xfe" in TEXTS stand for raw bytes: everything else is UTF-8.
    if "\xff" in text:
        return text.replace("\xff", "\0").replace("\xfe", "\1").encode("utf-8").replace(b"\0", b"\xff").replace(
            b"\1", b"\xfe")
    return text.encode("utf-8")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    llama = sys.argv[1]
    vocab = sys.argv[2] if len(sys.argv) > 2 else "/work/shared/models/vocab/ggml-vocab-gpt-2.gguf"
    tool = os.path.join(llama, "build", "bin", "llama-tokenize")
    base = gguf_io.read_gguf(vocab, load_tensors=False)
    lines = ["# llama-tokenize --ids --no-bos on %s with tokenizer.ggml.pre changed; written by "
             "tests/reference/make_pretok_fixtures.py" % os.path.basename(vocab)]
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRES:
            path = os.path.join(tmp, "vocab-%s.gguf" % pre)
            metadata = [(k, base.metadata_types[k], v) for k, v in base.metadata.items() if k != "tokenizer.ggml.pre"]
            metadata.append(("tokenizer.ggml.pre", gguf_io.STRING, pre))
            gguf_io.write_gguf(path, metadata, [])
            refused = None
            for text in TEXTS:
                data = text_bytes(text)
                prompt = os.path.join(tmp, "prompt.txt")
                with open(prompt, "wb") as f:
                    f.write(data)
                run = subprocess.run([tool, "-m", path, "-f", prompt, "--ids", "--no-bos", "--log-disable"],
                                     capture_output=True, text=True)
                if run.returncode != 0 and "could not load model" in run.stderr:
                    # jina-v2-*: llama.cpp needs a <mask> token, which GPT-2's vocabulary lacks.
                    refused = "llama-tokenize could not load the model (it looks up a <mask> token)"
                    break
                if run.returncode != 0:
                    sys.exit("llama-tokenize failed for pre %s on %r: %s" % (pre, text, run.stderr[-2000:]))
                ids = run.stdout.strip().strip("[]").replace(",", " ").split()
                lines.append("%s\t%s\t%s" % (pre, escape(data), " ".join(ids)))
            if refused:
                lines.append("# %s: llama.cpp refuses the vocabulary: %s" % (pre, refused))
                print("%s: refused by llama.cpp" % pre)
                continue
            print("%s: %d texts" % (pre, len(TEXTS)))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d lines)" % (OUT, len(lines) - 1))
    write_models_fixture(llama, tool)


def write_models_fixture(llama, tool):
    models = os.path.join(llama, "models")
    lines = ["# llama-tokenize --ids --no-bos [--no-parse-special] on llama.cpp's models/ggml-vocab-*.gguf; written by "
             "tests/reference/make_pretok_fixtures.py"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(models)):
            if not (name.startswith("ggml-vocab-") and name.endswith(".gguf")):
                continue
            model = gguf_io.read_gguf(os.path.join(models, name), load_tensors=False).metadata["tokenizer.ggml.model"]
            if model not in ("llama", "gpt2"):
                print("%s: left out (tokenizer.ggml.model %s, which kiln refuses)" % (name, model))
                continue
            for text in TEXTS + SPECIAL_TEXTS:
                data = text_bytes(text)
                prompt = os.path.join(tmp, "prompt.txt")
                with open(prompt, "wb") as f:
                    f.write(data)
                for mode in ("special", "literal"):
                    args = [tool, "-m", os.path.join(models, name), "-f", prompt, "--ids", "--no-bos", "--log-disable"]
                    if mode == "literal":
                        args.append("--no-parse-special")
                    run = subprocess.run(args, capture_output=True, text=True)
                    if run.returncode != 0:
                        sys.exit("llama-tokenize failed for %s on %r: %s" % (name, text, run.stderr[-2000:]))
                    ids = run.stdout.strip().strip("[]").replace(",", " ").split()
                    lines.append("%s\t%s\t%s\t%s" % (name, mode, escape(data), " ".join(ids)))
            print("%s: %d texts" % (name, len(TEXTS) + len(SPECIAL_TEXTS)))
    with open(OUT_MODELS, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d lines)" % (OUT_MODELS, len(lines) - 1))


if __name__ == "__main__":
    main()
