#!/usr/bin/python3
"""kiln-server over HTTP on loopback: SSE framing as curl sees it, error
statuses, the API key, a client that disconnects, 32 streamed requests from 8
clients at -np 4 giving a single client's greedy text, and SIGTERM.

usage: test_server.py KILN_SERVER MODEL [LOG_DIR]
Starts its own servers on free ports and kills them at the end; every wait is
bounded, so the test ends by itself.
"""
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

SERVER, MODEL = sys.argv[1], sys.argv[2]
KEY = "test-key-123"
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


class Server:
    """A kiln-server process on a free port of 127.0.0.1."""

    def __init__(self, *flags):
        self.log = open(os.path.join(LOG_DIR, "server-%d.log" % time.monotonic_ns()), "w+")
        self.proc = subprocess.Popen([SERVER, "-m", MODEL, "--port", "0", "-t", "2", *flags],
                                     stdout=self.log, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        self.port = None
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.write(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.kill()
            raise SystemExit("kiln-server did not start: see " + self.log.name)
        # Keep draining stderr into the log so the server never blocks on it.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def request(server, path, body=None, key=KEY, method=None, raw=None):
    """(status, parsed JSON or text) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(server.url(path), data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def stream_text(server, body):
    """Streams a chat completion; returns (text, finish_reason, events)."""
    body = dict(body, stream=True)
    req = urllib.request.Request(server.url("/v1/chat/completions"), data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + KEY)
    text, finish, events = "", None, []
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r.read().decode().split("\n\n"):
            if not raw:
                continue
            events.append(raw)
            payload = raw[len("data: "):]
            if payload == "[DONE]":
                continue
            chunk = json.loads(payload)
            choice = chunk["choices"][0]
            text += choice["delta"].get("content", "")
            finish = choice["finish_reason"] or finish
    return text, finish, events


def all_idle(server, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, slots = request(server, "/slots")
        if status == 200 and all(s["state"] == "idle" for s in slots):
            return True
        time.sleep(0.1)
    return False


def test_sse_framing_with_curl(server):
    body = json.dumps({"messages": [{"role": "user", "content": "Tell me a story"}], "stream": True,
                       "max_tokens": 12, "temperature": 0})
    out = subprocess.run(["curl", "-sN", "--max-time", "60", "-H", "Authorization: Bearer " + KEY,
                          "-H", "Content-Type: application/json", "-D", "-", "-d", body,
                          server.url("/v1/chat/completions")], capture_output=True, timeout=90).stdout.decode()
    headers, _, stream = out.partition("\r\n\r\n")
    check("text/event-stream" in headers, "SSE content type: " + headers)
    check(stream.endswith("data: [DONE]\n\n"), "stream ends with [DONE]: " + stream[-80:])
    events = stream.split("\n\n")[:-1]
    check(all(e.startswith("data: ") and "\n" not in e for e in events), "each event is one data line")
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    check(chunks[0]["choices"][0]["delta"].get("role") == "assistant", "first chunk carries the role")
    check(all(c["object"] == "chat.completion.chunk" for c in chunks), "chunk objects")
    check(len({c["id"] for c in chunks}) == 1, "one id for every chunk")
    check(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]), "finish_reason only at the end")
    check(chunks[-1]["choices"][0]["finish_reason"] == "length", "final finish_reason length")
    check(chunks[-1]["usage"]["completion_tokens"] == 12, "usage counts 12 tokens")
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    status, whole = request(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story"}],
                                                             "max_tokens": 12, "temperature": 0})
    check(status == 200 and whole["choices"][0]["message"]["content"] == streamed, "streamed text equals the whole reply")
    check(whole["object"] == "chat.completion", "chat.completion object")


def test_errors_and_key(server):
    chat = "/v1/chat/completions"
    cases = [
        (chat, None, b"{not json", 400),
        (chat, {"messages": "hello"}, None, 400),
        (chat, {"messages": [{"role": "wizard", "content": "x"}]}, None, 400),
        (chat, {"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, None, 400),
        (chat, {"messages": [{"role": "user", "content": "x"}], "temperature": -1}, None, 400),
        (chat, {"messages": [{"role": "user", "content": "x"}], "temperature": "warm"}, None, 400),
        ("/v1/completions", {"prompt": "word " * 600}, None, 400),  # longer than a slot's context
        ("/v1/completions", {"prompt": "x", "max_tokens": 100000}, None, 400),
        ("/tokenize", {"content": 5}, None, 400),
        ("/detokenize", {"tokens": [-1]}, None, 400),
        ("/no/such/endpoint", {}, None, 404),
        (chat, None, b"{\"messages\": \"" + b"a" * 70000 + b"\"}", 413),
    ]
    for path, body, raw, expected in cases:
        status, answer = request(server, path, body, raw=raw)
        check(status == expected, "%s %s -> %s (expected %d): %s" % (path, (raw or b"")[:30] or body, status, expected, str(answer)[:200]))
        check(isinstance(answer, dict) and set(answer.get("error", {})) == {"message", "type", "code"}
              and answer["error"]["code"] == expected, "OpenAI error shape: %s" % str(answer)[:200])
    status, _ = request(server, "/v1/models", key=None)
    check(status == 401, "no key -> 401")
    status, answer = request(server, "/v1/models", key="wrong")
    check(status == 401 and answer["error"]["type"] == "authentication_error", "wrong key -> 401")
    status, answer = request(server, "/health", key=None)
    check(status == 200 and answer == {"status": "ok"}, "/health needs no key")
    status, answer = request(server, "/v1/models")
    check(status == 200 and answer["data"][0]["id"] == "stories260K.gguf", "/v1/models with the key")
    status, answer = request(server, "/tokenize", {"content": "Once upon"})
    check(status == 200 and answer["tokens"] == [403, 407], "/tokenize: %s" % answer)
    status, answer = request(server, "/detokenize", {"tokens": [403, 407]})
    check(status == 200 and answer["content"] == "Once upon", "/detokenize: %s" % answer)
    status, answer = request(server, "/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
    check(status == 200 and answer["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
          "/apply-template (ChatML): %s" % answer)
    status, answer = request(server, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4,
                                                         "temperature": 0, "logprobs": 2})
    lp = answer["choices"][0]["logprobs"] if status == 200 else None
    check(lp is not None and len(lp["tokens"]) == 4 and len(lp["top_logprobs"][0]) == 2
          and all(x <= 0 for x in lp["token_logprobs"]), "completion logprobs: %s" % str(answer)[:300])
    check(answer["choices"][0]["text"] == "".join(lp["tokens"]), "logprob tokens spell the text")
    # logit_bias over HTTP: banning greedy's first token changes the first
    # token; a bias of 100 on a token makes greedy emit only it.
    plain = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "logprobs": 0}
    status, answer = request(server, "/v1/completions", plain)
    first = answer["choices"][0]["logprobs"]["tokens"][0] if status == 200 else None
    status, ids = request(server, "/tokenize", {"content": first or ""})
    banned = ids["tokens"][-1] if status == 200 and ids["tokens"] else None
    status, answer = request(server, "/v1/completions", dict(plain, logit_bias={str(banned): -100}))
    check(status == 200 and answer["choices"][0]["logprobs"]["tokens"][0] != first,
          "logit_bias -100 on greedy's first token %r (id %s) changes it: %s" % (first, banned, str(answer)[:200]))
    status, answer = request(server, "/v1/completions", dict(plain, logit_bias=[[407, 100]]))
    check(status == 200 and answer["choices"][0]["text"] == " upon" * 4,
          "logit_bias 100 on ' upon' (407): %s" % str(answer)[:200])
    status, answer = request(server, "/v1/completions", dict(plain, echo=True))
    check(status == 400 and "'echo' is not supported" in answer["error"]["message"], "echo: true is refused: %s" % answer)


def test_disconnect_frees_slot(server):
    # 400 tokens that no end-of-text cuts short; a client that leaves after
    # the first chunks must free its slot long before they are done.
    body = json.dumps({"messages": [{"role": "user", "content": "Tell me a long story"}], "stream": True,
                       "max_tokens": 400, "ignore_eos": True})
    for _ in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", body, {"Authorization": "Bearer " + KEY,
                                                            "Content-Type": "application/json"})
        r = conn.getresponse()
        check(r.status == 200 and len(r.read1(200)) > 0, "the stream started")
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        check(all_idle(server), "every slot idle after the client left")
        status, slots = request(server, "/slots")
        decoded = max(s["n_decoded"] for s in slots)
        check(decoded < 300, "the request was cancelled, not finished (%d tokens generated)" % decoded)


def test_load(server):
    prompts = ["Tell me about a %s" % w for w in ["cat", "dog", "tree", "ball", "boat", "bird", "cake", "car"]]
    bodies = [{"messages": [{"role": "user", "content": p}], "max_tokens": 32, "temperature": 0} for p in prompts]
    expected = [stream_text(server, b)[0] for b in bodies]
    jobs = [bodies[i % len(bodies)] for i in range(32)]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda b: stream_text(server, b), jobs))
    seconds = time.monotonic() - started
    mismatches = sum(1 for i, (text, finish, _) in enumerate(results) if text != expected[i % len(bodies)])
    check(mismatches == 0, "%d of 32 concurrent replies differ from a single client's" % mismatches)
    check(all(finish in ("stop", "length") for _, finish, _ in results), "every reply finished")
    print("load: 32 requests, 8 clients, -np 4: %.2f s" % seconds, flush=True)
    check(all_idle(server), "every slot idle after the load test")


def test_native_completion(server):
    # llama-server's own POST /completion: the text /v1/completions gives, in
    # its answer's shape; streamed as {"content", "stop"} events ending with
    # "stop": true and no [DONE]; stop_type names why it ended.
    body = {"prompt": "Once upon a time", "n_predict": 12, "temperature": 0}
    status, openai = request(server, "/v1/completions", body)
    status_native, native = request(server, "/completion", body)
    check(status == 200 and status_native == 200, "/completion answers: %s" % str(native)[:200])
    check(native.get("content") == openai["choices"][0]["text"] and native.get("stop") is True
          and native.get("tokens_predicted") == 12 and native.get("stop_type") == "limit",
          "/completion's content, tokens_predicted and stop_type: %s" % str(native)[:300])
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/completion", json.dumps(dict(body, stream=True)),
                 {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    raw = conn.getresponse().read().decode()
    events = [json.loads(e[6:]) for e in raw.split("\n\n") if e.startswith("data: ")]
    check(bool(events) and events[-1].get("stop") is True and all(e.get("stop") is False for e in events[:-1])
          and "[DONE]" not in raw, "/completion streams pieces then one stop event: %r" % raw[-300:])
    check("".join(e.get("content", "") for e in events) == native.get("content"),
          "/completion's streamed pieces spell its answer")
    text = native.get("content", "")
    word = text.split()[1] if len(text.split()) > 1 else None
    status, stopped = request(server, "/completion", dict(body, stop=[word]))
    check(status == 200 and stopped.get("stop_type") == "word" and stopped.get("stopping_word") == word
          and word not in stopped.get("content", word), "/completion stop string %r: %s" % (word, str(stopped)[:300]))
    status, answer = request(server, "/completion", dict(body, logprobs=2))
    check(status == 400, "/completion refuses OpenAI's logprobs: %s" % answer)


def test_port_in_use(server):
    # A second server on a port a live one holds must refuse to start: with
    # SO_REUSEPORT both would listen and share the connections silently.
    second = subprocess.Popen([SERVER, "-m", MODEL, "--port", str(server.port), "-t", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        stderr = second.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        second.kill()
        stderr = second.communicate()[1]
    lines = stderr.strip().splitlines()
    check(second.returncode != 0, "a second server on port %d exits non-zero (got %d)" % (server.port, second.returncode))
    check(bool(lines) and "cannot listen on 127.0.0.1:%d" % server.port in lines[-1],
          "the second server names the port it cannot take: %r" % lines[-1:])
    check(not any("listening on" in line for line in lines), "the second server never says it is listening")
    check(request(server, "/health")[0] == 200, "the first server still answers after the refused second one")


def test_llama_server_flags():
    # -cb is accepted (batching is always continuous), keys come from a file
    # (one per line), --no-webui drops the chat page, -to sets the timeout.
    keys = os.path.join(LOG_DIR, "keys.txt")
    with open(keys, "w") as f:
        f.write("first-key\n\nsecond-key  \n")
    server = Server("-np", "1", "-c", "256", "-cb", "--api-key-file", keys, "--no-webui", "-to", "30", "--temp", "0")
    try:
        check(request(server, "/v1/models", key="second-key")[0] == 200, "the file's second key is accepted")
        check(request(server, "/v1/models", key="first-key")[0] == 200, "the file's first key is accepted")
        check(request(server, "/v1/models", key="third-key")[0] == 401, "a key not in the file is refused")
        check(request(server, "/", key="first-key")[0] == 404, "--no-webui: no chat page")
        # --temp 0: a request that gives no temperature is greedy.
        texts = [request(server, "/v1/completions", dict({"prompt": "Once upon a time", "max_tokens": 12}, **extra),
                         key="first-key")[1]["choices"][0]["text"] for extra in ({}, {}, {"temperature": 0})]
        check(texts[0] == texts[1] == texts[2], "--temp 0 is every request's default: %r" % texts)
        status, props = request(server, "/props", key="first-key")
        settings = props.get("default_generation_settings", {}) if status == 200 else {}
        check(status == 200 and props.get("total_slots") == 1 and settings.get("n_ctx") == 256
              and settings.get("params", {}).get("temperature") == 0 and settings["params"].get("seed") == -1
              and props.get("model_path") == MODEL and "<|im_start|>" in props.get("chat_template", ""),
              "/props: %s" % str(props)[:300])
    finally:
        server.kill()
    refused = subprocess.run([SERVER, "-m", MODEL, "-nocb"], capture_output=True, text=True, timeout=60)
    check(refused.returncode == 2 and "always batches continuously" in refused.stderr, "-nocb is refused: %r" % refused.stderr)


def test_sigterm():
    server = Server("-np", "2", "-c", "1024")
    try:
        body = json.dumps({"prompt": "Once upon a time", "stream": True, "max_tokens": 400, "ignore_eos": True}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        first = r.read1(100)
        server.proc.send_signal(signal.SIGTERM)
        rest = first + r.read()
        check(rest.endswith(b"data: [DONE]\n\n"), "a running stream ends with [DONE] on SIGTERM: %r" % rest[-120:])
        code = server.proc.wait(timeout=20)
        check(code == 0, "exit status after SIGTERM is %s" % code)
    finally:
        server.kill()


LOG_DIR = sys.argv[3] if len(sys.argv) > 3 else os.getcwd()
os.makedirs(LOG_DIR, exist_ok=True)


def main():
    server = Server("-np", "4", "-c", "2048", "--api-key", KEY, "--max-body-bytes", "65536")
    try:
        for test in (test_sse_framing_with_curl, test_errors_and_key, test_native_completion, test_disconnect_frees_slot,
                     test_load, test_port_in_use):
            print("--", test.__name__, flush=True)
            test(server)
        check(server.proc.poll() is None, "the server is still running after every test")
    finally:
        server.kill()
    print("-- test_llama_server_flags", flush=True)
    test_llama_server_flags()
    print("-- test_sigterm", flush=True)
    test_sigterm()
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all server checks passed")
    return 0


if __name__ == "__main__":
    signal.alarm(600)  # a hard bound, whatever hangs
    sys.exit(main())
