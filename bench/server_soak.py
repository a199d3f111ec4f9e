#!/usr/bin/python3
"""A bounded soak of kiln-server (or any OpenAI-compatible server on loopback):
for --minutes, or until --requests are done, C clients send completions and
chat requests, streaming or not, and about one in --disconnect-every hangs up
in the middle of a streamed reply. Every --sample-seconds it reads the server's
resident memory (VmRSS of --pid, from /proc) and prints it. At the end it
prints the RSS series' first, last, minimum and maximum after the warm-up, the
counts of requests by outcome, and every unexpected error (any non-200 status,
a malformed stream, a refused connection). No assertions: it prints the
figures, and exits 1 if an unexpected error happened.

usage: server_soak.py URL --pid PID [--minutes 30] [--requests 100000]
                      [--clients 6] [--disconnect-every 7] [--sample-seconds 30]
   e.g. kiln-server -m model.gguf -np 4 -c 1024 -t 1 --port 8090 & pid=$!
        bench/server_soak.py http://127.0.0.1:8090 --pid $pid --minutes 30
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


class Soak:
    def __init__(self, url, deadline, max_requests, disconnect_every, seed):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.deadline, self.max_requests = deadline, max_requests
        self.disconnect_every = disconnect_every
        self.lock = threading.Lock()
        self.started = 0
        self.outcomes = {}
        self.errors = []
        self.seed = seed

    def claim(self):
        with self.lock:
            if self.started >= self.max_requests or time.monotonic() >= self.deadline:
                return None
            self.started += 1
            return self.started

    def count(self, outcome, error=None):
        with self.lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if error:
                self.errors.append(error)

    def one(self, rng, n):
        chat = rng.random() < 0.5
        stream = rng.random() < 0.7
        hang_up = stream and rng.randrange(self.disconnect_every) == 0
        words = " ".join(rng.choice(["Once", "upon", "a", "time", "the", "cat", "sat", "on", "mat"])
                         for _ in range(rng.randrange(1, 40)))
        body = {"max_tokens": rng.randrange(1, 64), "temperature": rng.choice([0, 0.8]),
                "seed": n, "stream": stream}
        if chat:
            path = "/v1/chat/completions"
            body["messages"] = [{"role": "user", "content": words}]
        else:
            path = "/v1/completions"
            body["prompt"] = words
        conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                self.count("error", "request %d %s: HTTP %d %s" % (n, path, r.status, r.read()[:200]))
                return
            if not stream:
                reply = json.loads(r.read())
                if not reply.get("choices"):
                    self.count("error", "request %d: no choices in %s" % (n, str(reply)[:200]))
                    return
                self.count("complete")
                return
            events = 0
            done = False
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                if not line.startswith(b"data: "):
                    self.count("error", "request %d: not an SSE data line: %r" % (n, line[:100]))
                    return
                if line == b"data: [DONE]":
                    done = True
                    break
                json.loads(line[6:])
                events += 1
                if hang_up and events >= 2:
                    conn.sock.close()  # the client goes away mid-stream
                    self.count("disconnected by the test")
                    return
            if done:
                self.count("complete")
            elif hang_up:
                self.count("complete")  # the reply ended before the planned hang-up
            else:
                self.count("error", "request %d: stream ended without [DONE] after %d events" % (n, events))
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.count("error", "request %d %s: %s: %s" % (n, path, type(e).__name__, e))
        finally:
            conn.close()

    def client(self, index):
        rng = random.Random(self.seed * 1000 + index)
        while True:
            n = self.claim()
            if n is None:
                return
            self.one(rng, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--pid", type=int, required=True, help="the server's process id (for its RSS)")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--disconnect-every", type=int, default=7)
    ap.add_argument("--sample-seconds", type=float, default=30)
    ap.add_argument("--warmup-samples", type=int, default=2, help="RSS samples left out of the summary")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    start = time.monotonic()
    soak = Soak(a.url, start + a.minutes * 60, a.requests, a.disconnect_every, a.seed)
    threads = [threading.Thread(target=soak.client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    samples = [(0.0, rss_kib(a.pid))]
    print("t=0s rss=%d KiB" % samples[0][1], flush=True)
    while any(t.is_alive() for t in threads):
        time.sleep(min(a.sample_seconds, max(0.1, soak.deadline - time.monotonic() + 1)))
        s = (time.monotonic() - start, rss_kib(a.pid))
        samples.append(s)
        with soak.lock:
            done = sum(soak.outcomes.values())
        print("t=%.0fs rss=%d KiB requests=%d" % (s[0], s[1], done), flush=True)
    for t in threads:
        t.join()
    samples.append((time.monotonic() - start, rss_kib(a.pid)))
    kept = [r for _, r in samples[a.warmup_samples:]] or [samples[-1][1]]
    print("requests: %d in %.0f s; %s" % (soak.started, time.monotonic() - start,
                                          ", ".join("%s %d" % kv for kv in sorted(soak.outcomes.items()))))
    print("server RSS after warm-up (KiB): first %d, last %d, min %d, max %d (%d samples)"
          % (kept[0], kept[-1], min(kept), max(kept), len(kept)))
    for e in soak.errors[:20]:
        print("unexpected:", e)
    if len(soak.errors) > 20:
        print("... and %d more" % (len(soak.errors) - 20))
    return 1 if soak.errors else 0


if __name__ == "__main__":
    sys.exit(main())
