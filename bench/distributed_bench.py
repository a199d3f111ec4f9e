#!/usr/bin/env python3
"""kiln's tools under mpirun on one machine (docs/distributed.md), against one
process in the same run:

  1. kiln-train tokens/s: 2 ranks x 1 thread against 1 rank x 1 thread and
     1 rank x 2 threads (median of the per-step rates, first steps dropped),
     and the gradient sums' bytes and wait per step (kiln-train's last line);
  2. peak RSS of each rank of kiln --layer-split at -np 2 (and 3) against one
     process generating from the same model.

usage: bench/distributed_bench.py BUILD_TOOLS_DIR LAYER_SPLIT_MODEL.gguf [--steps N] [--out results.json]

The layer-split model is meant to be the 1.1B-shaped Llama:
  /usr/bin/python3 bench/make_llama_gguf.py --shape tinyllama-1.1b --type q8_0 --out /work/bench-models/tinyllama-q8_0.gguf
Run it on a quiet machine; it prints the CPU it ran on.
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none"]
HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def train(tools, work, ranks, threads, steps, text):
    out = os.path.join(work, f"train-{ranks}x{threads}.gguf")
    flags = [os.path.join(tools, "kiln-train"), "-f", text, "--iters", str(steps), "--eval-interval", str(steps),
             "--eval-batches", "1", "--warmup", "5", "-t", str(threads), "-o", out]
    cmd = (MPIRUN + ["-np", str(ranks)] + flags) if ranks > 1 else flags
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=True)
    with open(out.replace(".gguf", ".csv")) as f:
        rates = [float(r["tokens_per_s"]) for r in csv.DictReader(f)]
    rates = rates[5:-1]  # warm-up steps and the last (it evaluates)
    sync = re.search(r"gradient sums over \d+ ranks: ([\d.]+) MiB per step in (\d+) buckets; ([\d.]+) ms per step "
                     r"left to wait after backward \(([\d.]+)% of the ([\d.]+) ms", p.stderr)
    result = {"ranks": ranks, "threads": threads, "tokens_per_s": statistics.median(rates), "steps_timed": len(rates)}
    if sync:
        result.update(sum_mib_per_step=float(sync.group(1)), buckets=int(sync.group(2)),
                      wait_ms_per_step=float(sync.group(3)), wait_percent=float(sync.group(4)),
                      last_run_ms=float(sync.group(5)))
    return result


def peak_rss(tools, model, ranks):
    """Peak resident memory (MiB) of each rank generating 16 tokens greedily."""
    flags = [os.path.join(tools, "kiln"), "-m", model, "-p", "Once upon a time", "-n", "16", "--temp", "0", "-t", "1",
             "-c", "512"]
    if ranks > 1:
        flags.append("--layer-split")
    wrapped = ["/usr/bin/python3", os.path.join(HERE, "rss_of.py")] + flags
    cmd = (MPIRUN + ["-np", str(ranks)] + wrapped) if ranks > 1 else wrapped
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=True)
    rss = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"rss_of: rank (\d+) peak ([\d.]+) MiB", p.stderr)}
    split = re.search(r"layer split: (.*)", p.stderr)
    return {"ranks": ranks, "peak_rss_mib": [rss[r] for r in sorted(rss)], "text": p.stdout.strip(),
            "plan": split.group(1) if split else ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tools")
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the three training runs, alternating, so that a machine whose speed drifts "
                         "(a shared VM) weighs on all three alike; the ratios are the medians of the rounds'")
    ap.add_argument("--out")
    a = ap.parse_args()
    shared = os.path.join(HERE, "..", "..", "shared", "data", "tinyshakespeare.txt")
    results = {"cpu": cpu_name(), "cores": os.cpu_count()}
    print(f"CPU: {results['cpu']} ({results['cores']} logical CPUs)")
    with tempfile.TemporaryDirectory() as work:
        print("kiln-train, the default model (4 layers, width 128, context 64, batch 12), median tokens/s per run:")
        rounds = []
        for k in range(a.rounds):
            runs = [train(a.tools, work, r, t, a.steps, shared) for r, t in ((1, 1), (1, 2), (2, 1))]
            rounds.append(runs)
            one, two_threads, two_ranks = (r["tokens_per_s"] for r in runs)
            s = runs[2]
            print(f"  round {k + 1}: 1x1 {one:.0f}, 1x2 {two_threads:.0f}, 2 ranks x 1 {two_ranks:.0f}: "
                  f"{two_ranks / one:.2f}x one thread, {two_ranks / two_threads:.2f}x two threads; sums "
                  f"{s.get('sum_mib_per_step', 0):.2f} MiB/step in {s.get('buckets', 0)} buckets, "
                  f"{s.get('wait_ms_per_step', 0):.2f} ms/step waited after backward ({s.get('wait_percent', 0):.1f}%)")
        results["train"] = rounds
        vs_one = statistics.median(r[2]["tokens_per_s"] / r[0]["tokens_per_s"] for r in rounds)
        vs_two = statistics.median(r[2]["tokens_per_s"] / r[1]["tokens_per_s"] for r in rounds)
        print(f"  median of {a.rounds} rounds: 2 ranks / 1 rank of 1 thread {vs_one:.2f}x (target >= 1.8), "
              f"/ 1 rank of 2 threads {vs_two:.2f}x (target >= 0.9)")
    rss = [peak_rss(a.tools, a.model, n) for n in (1, 2, 3)]
    results["layer_split_rss"] = rss
    base = rss[0]["peak_rss_mib"][0]
    print(f"kiln --layer-split, {os.path.basename(a.model)}: peak RSS of one process {base:.0f} MiB")
    for r in rss[1:]:
        worst = max(r["peak_rss_mib"])
        same = "same text" if r["text"] == rss[0]["text"] else "OTHER TEXT"
        print(f"  -np {r['ranks']}: " + ", ".join(f"rank {i} {m:.0f} MiB" for i, m in enumerate(r["peak_rss_mib"])) +
              f"; largest {worst / base:.0%} of one process (target at -np 2: <= 60%); {same}")
        print(f"    {r['plan']}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
