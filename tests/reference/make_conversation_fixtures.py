#!/usr/bin/env python3
"""Expected replies of a two-turn conversation, for kiln's conversation mode (-cnv).

Each turn's prompt is the whole conversation so far rendered by Python's jinja2
the way Hugging Face's apply_chat_template does (make_chat_template_fixtures'
environment) with the Qwen2.5 template of tests/fixtures/chat_templates, a
system prompt, and add_generation_prompt; the reply is llama.cpp's greedy
continuation of that prompt (llama-simple, c392e509, which tokenizes with BOS
and special tokens parsed, and stops at an end-of-generation token), on
stories260K. prompt_tokens_evaluated counts what a cache kept across turns
must evaluate (llama-tokenize's tokens of each prompt past the prefix shared
with the previous prompt and reply). The second turn's prompt holds the first reply as the assistant
message, so kiln's replies equal these only if it renders every turn as
jinja2 does and its KV cache, kept across turns, holds what a fresh
evaluation of the whole prompt would.

usage: [KILN_SHARED_DIR=...] /usr/bin/python3 make_conversation_fixtures.py LLAMA_BIN_DIR
Writes tests/fixtures/conversation/expected.json.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from make_chat_template_fixtures import make_environment  # noqa: E402

SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
TEMPLATE = os.path.join(ROOT, "tests", "fixtures", "chat_templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
OUT = os.path.join(ROOT, "tests", "fixtures", "conversation")
N_PREDICT = 24
SYSTEM = "You tell short stories."
USER_TURNS = ["Tell me about a cat.", "And then what did the dog say?"]


def main():
    bin_dir = sys.argv[1]
    env = make_environment()
    with open(TEMPLATE) as f:
        template = env.from_string(f.read())
    messages = [{"role": "system", "content": SYSTEM}]
    replies, evaluated, cached = [], 0, []
    for user in USER_TURNS:
        messages.append({"role": "user", "content": user})
        prompt = template.render(messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
        out = subprocess.run([os.path.join(bin_dir, "llama-simple"), "-m", MODEL, "-n", str(N_PREDICT), prompt],
                             check=True, capture_output=True).stdout
        ids = json.loads(subprocess.run([os.path.join(bin_dir, "llama-tokenize"), "-m", MODEL, "-p", prompt, "--ids",
                                         "--log-disable"], check=True, capture_output=True).stdout.decode().strip()
                         .splitlines()[-1])
        # What a cache that kept the previous turn (its prompt and reply) must still evaluate.
        common = 0
        while common < min(len(ids), len(cached)) and ids[common] == cached[common]:
            common += 1
        evaluated += len(ids) - min(common, len(ids) - 1)
        # llama-simple prints the BOS piece, then the prompt (its first piece with
        # SentencePiece's space prefix), then the continuation.
        head = b"<s> " + prompt.encode()
        assert out.startswith(head), out[:60]
        reply = out[len(head):].rstrip(b"\n").decode("utf-8")  # stories260K's replies here are whole characters
        replies.append(reply)
        # The reply's tokens in context: the prompt and reply tokenized together (greedy
        # decoding of this model produces the tokenizer's own split here; kiln's count checks it).
        together = json.loads(subprocess.run([os.path.join(bin_dir, "llama-tokenize"), "-m", MODEL, "-p",
                                              prompt + reply, "--ids", "--log-disable"], check=True,
                                             capture_output=True).stdout.decode().strip().splitlines()[-1])
        assert together[:len(ids)] == ids
        reply_ids = together[len(ids):]
        cached = ids + reply_ids
        messages.append({"role": "assistant", "content": reply})
        print(repr(user), "->", repr(reply))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"generator": "tests/reference/make_conversation_fixtures.py (llama.cpp c392e509 llama-simple)",
                   "template": os.path.relpath(TEMPLATE, ROOT), "system": SYSTEM, "n_predict": N_PREDICT,
                   "prompt_tokens_evaluated": evaluated,
                   "turns": [{"user": u, "reply": r} for u, r in zip(USER_TURNS, replies)]}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
