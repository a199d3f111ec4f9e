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
import json
import random
import statistics
import threading
import time
import urllib.request


def stream(url, prompt, max_tokens, first_token=None):
    """Streams one completion; returns (tokens generated, seconds, seconds to first text)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.monotonic()
    ttft, tokens = None, 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"][0].get("text") and ttft is None:
                ttft = time.monotonic() - start
                if first_token:
                    first_token.set()
            if "usage" in chunk and chunk["usage"]:
                tokens = chunk["usage"]["completion_tokens"]
    return tokens, time.monotonic() - start, ttft


def aggregate(url, streams, max_tokens):
    prompts = ["Once upon a time, %d little cats" % i for i in range(streams)]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(lambda p: stream(url, p, max_tokens), prompts))
    return sum(r[0] for r in results) / (time.monotonic() - start)


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
    one = statistics.median(aggregate(a.url, 1, a.tokens) for _ in range(a.runs))
    many = statistics.median(aggregate(a.url, a.streams, a.tokens) for _ in range(a.runs))
    idle = ttft_idle(a.url, a.ttft_samples)
    busy = ttft_under_load(a.url, a.streams - 1, a.tokens, a.ttft_samples)
    print("aggregate generation: 1 stream %.1f tokens/s, %d streams %.1f tokens/s (%.2fx)" % (one, a.streams, many, many / one))
    print("time to first token (short prompt): idle %.1f ms, with %d streams generating %.1f ms (%.2fx)"
          % (idle * 1000, a.streams - 1, busy * 1000, busy / idle))


if __name__ == "__main__":
    main()
