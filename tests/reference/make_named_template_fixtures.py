#!/usr/bin/python3
"""Formats conversations with each chat template llama.cpp knows by name
(`llama-cli --chat-template NAME`), by calling llama.cpp's own
llama_chat_apply_template through its shared library, and writes what kiln's
--chat-template NAME must produce to tests/fixtures/named_chat_templates.json.

Needs a built llama.cpp checkout (include/llama.h, build/bin/libllama.so):
  KILN_LLAMA_CPP_DIR=/path/to/llama.cpp /usr/bin/python3 tests/reference/make_named_template_fixtures.py
A small C program is compiled in a temporary folder and run once per case.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "named_chat_templates.json")

NAMES = ["chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "llama3", "mistral-v1",
         "mistral-v3", "mistral-v3-tekken", "mistral-v7", "phi3", "phi4", "falcon3", "zephyr", "gemma",
         "vicuna", "vicuna-orca", "deepseek3"]

CONVERSATIONS = [
    # llama.cpp's own test conversation (tests/test-chat-template.cpp).
    [["system", "You are a helpful assistant"], ["user", "Hello"], ["assistant", "Hi there"],
     ["user", "Who are you"], ["assistant", "   I am an assistant   "], ["user", "Another question"]],
    [["user", "Hi"]],
    [["system", "  Be brief.\n"], ["user", "\tWhat is 2+2? \n"]],
    [["user", "Grüße, ünïcödé ✓"], ["assistant", "Ça va ? 日本語\n"], ["user", "line one\nline two"]],
    [["user", "first"], ["assistant", "second"], ["user", "third"], ["assistant", " fourth "]],
    [["system", "only a system message"]],
]

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
/* argv: name add_ass role content role content ... ; prints the formatted text */
int main(int argc, char ** argv) {
    size_t n = (size_t)(argc - 3) / 2;
    struct llama_chat_message * chat = calloc(n ? n : 1, sizeof *chat);
    for (size_t i = 0; i < n; ++i) { chat[i].role = argv[3 + 2 * i]; chat[i].content = argv[4 + 2 * i]; }
    int add_ass = atoi(argv[2]);
    int32_t size = llama_chat_apply_template(argv[1], chat, n, add_ass, NULL, 0);
    if (size < 0) { fprintf(stderr, "template '%s' not supported\n", argv[1]); return 3; }
    char * buf = malloc((size_t)size + 1);
    llama_chat_apply_template(argv[1], chat, n, add_ass, buf, size + 1);
    fwrite(buf, 1, (size_t)size, stdout);
    return 0;
}
"""


def main():
    llama = os.environ.get("KILN_LLAMA_CPP_DIR")
    if not llama:
        sys.exit("set KILN_LLAMA_CPP_DIR to a built llama.cpp checkout")
    lib_dir = os.path.join(llama, "build", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "apply.c")
        exe = os.path.join(tmp, "apply")
        with open(source, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["cc", "-O1", source, "-I", os.path.join(llama, "include"), "-I", os.path.join(llama, "ggml", "include"),
                        "-L", lib_dir, "-lllama", "-Wl,-rpath," + lib_dir, "-o", exe], check=True)
        cases = []
        for name in NAMES:
            for conversation in CONVERSATIONS:
                for add_ass in (False, True):
                    args = [exe, name, "1" if add_ass else "0"] + [part for message in conversation for part in message]
                    text = subprocess.run(args, check=True, capture_output=True).stdout.decode("utf-8")
                    cases.append({"name": name, "add_generation_prompt": add_ass,
                                  "messages": [{"role": r, "content": c} for r, c in conversation],
                                  "output": text})
    with open(OUT, "w", encoding="utf-8") as f:
        # One case per line, so that a change reads as a diff of cases.
        f.write('{"generator": "llama.cpp llama_chat_apply_template (tests/reference/make_named_template_fixtures.py)",\n')
        f.write(' "cases": [\n')
        f.write(",\n".join(json.dumps(case, ensure_ascii=False) for case in cases))
        f.write("\n]}\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
