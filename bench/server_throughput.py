#!/usr/bin/python3
"""Measures kiln-server (or llama-server: any OpenAI-compatible server on
loopback): aggregate generation tokens/s with 1 and with N concurrent streams,
and time to first token of a short prompt, idle and while N-1 other streams
generate (the median of --ttft-samples requests each, sent one after another
at random spacing). No assertions: it prints the figures.

usage: server_throughput.py URL [--streams 4] [--tokens 128] [--runs 3] [--ttft-samples 25]
   e.g. kiln-server -m model.gguf -np 4 -c 2048 --port 8080 &
        bench/server_throughput.py http://127.0.0.1:8080
"""
import argparse
import concurrent.futures
import http.client
import json
import random
import statistics
import threading
import time
import urllib.parse


def stream(url, prompt, max_tokens, first_token=None, ready=None):
    """Streams one completion; returns (tokens generated, seconds, seconds to
    first text, the monotonic time the request was sent).

    The client shares the machine with the server, so it does as little as it
    can per event: events are parsed as JSON only until the first text arrives
    and for the last one (the usage); the rest are read in large pieces and
    never split into lines. (Parsing every event in Python took most of a core
    at several thousand tokens/s and capped what a small model's server showed.)
    With `ready` (a threading.Barrier), the connection is opened first and the
    request sent when every stream of the barrier is connected, so that N
    streams of a fast server really run together."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True}).encode()
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port or 80, timeout=600)
    try:
        conn.connect()
        if ready is not None:
            ready.wait()
        start = time.monotonic()
        conn.request("POST", where.path.rstrip("/") + "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            raise RuntimeError("HTTP %d: %r" % (r.status, r.read()[:200]))
        ttft, pending, tail = None, b"", b""
        while True:
            piece = r.read1(1 << 16)
            if not piece:
                break
            if ttft is None:
                pending += piece
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    if event.startswith(b"data: {") and json.loads(event[6:])["choices"][0].get("text"):
                        ttft = time.monotonic() - start
                        if first_token:
                            first_token.set()
                        break
            tail = (tail + piece)[-4096:]
    finally:
        conn.close()
    # One of the last events (before [DONE]) carries the usage.
    usage = None
    for event in reversed(tail.split(b"\n\n")):
        if event.startswith(b"data: {") and b'"usage"' in event:
            usage = json.loads(event[6:]).get("usage")
            if usage:
                break
    if not usage:
        raise RuntimeError("the stream ended without a usage event: %r" % tail[-200:])
    return usage["completion_tokens"], time.monotonic() - start, ttft, start


def aggregate(url, streams, max_tokens):
    """Tokens/s of `streams` completions sent together (connected first, then
    released at once), from the first request sent to the last token."""
    prompts = ["Once upon a time, %d little cats" % i for i in range(streams)]
    ready = threading.Barrier(streams)
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(lambda p: stream(url, p, max_tokens, ready=ready), prompts))
    start = min(r[3] for r in results)
    end = max(r[3] + r[1] for r in results)
    return sum(r[0] for r in results) / (end - start)


def ttft_idle(url, samples):
    """Median time to first text of a short prompt on an idle server, `samples` requests."""
    random.seed(1)
    times = []
    for _ in range(samples):
        times.append(stream(url, "Hi", 4)[2])
        time.sleep(random.uniform(0.01, 0.05))  # arrivals at no fixed phase of anything
    return statistics.median(times)


def ttft_under_load(url, others, max_tokens, samples):
    """The same while `others` streams generate (each restarting when it ends)."""
    random.seed(2)
    stop = threading.Event()
    started = [threading.Event() for _ in range(others)]

    def keep_streaming(i):
        while not stop.is_set():
            stream(url, "A long story number %d:" % i, max_tokens, started[i])

    with concurrent.futures.ThreadPoolExecutor(others) as pool:
        futures = [pool.submit(keep_streaming, i) for i in range(others)]
        for e, f in zip(started, futures):
            while not e.wait(0.1):
                if f.done():
                    f.result()  # a stream that failed before its first token: raise its error now
                    break
        times = []
        try:
            for _ in range(samples):
                times.append(stream(url, "Hi", 4)[2])
                time.sleep(random.uniform(0.01, 0.05))
        finally:
            stop.set()
            for f in futures:
                f.result()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ttft-samples", type=int, default=25)
    a = ap.parse_args()
    aggregate(a.url, a.streams, 16)  # warm-up: the server builds its graphs once per batch size
    # 1 and N streams alternate, so a drift of the machine's speed (a shared
    # VM's can be 1.5x in minutes) moves both alike; the ratio is the median
    # of the rounds' ratios.
    ones, manys = [], []
    for _ in range(a.runs):
        ones.append(aggregate(a.url, 1, a.tokens))
        manys.append(aggregate(a.url, a.streams, a.tokens))
    one, many = statistics.median(ones), statistics.median(manys)
    ratio = statistics.median(m / o for o, m in zip(ones, manys))
    idle = ttft_idle(a.url, a.ttft_samples)
    busy = ttft_under_load(a.url, a.streams - 1, a.tokens, a.ttft_samples)
    print("aggregate generation: 1 stream %.1f tokens/s, %d streams %.1f tokens/s (medians of %d runs; median ratio %.2fx)"
          % (one, a.streams, many, a.runs, ratio))
    print("time to first token (short prompt): idle %.1f ms, with %d streams generating %.1f ms (%.2fx)"
          % (idle * 1000, a.streams - 1, busy * 1000, busy / idle))


if __name__ == "__main__":
    main()
