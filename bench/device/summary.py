#!/usr/bin/env python3
"""Summarises bench/device/run_side_by_side.sh's benchmark files as a Markdown table.

    python3 bench/device/summary.py OUT_DIR            (reads OUT_DIR/json/*.json, prints Markdown)

Each file is one engine's llama-bench-style JSON array (kiln-bench, ik_llama.cpp's or
llama.cpp's llama-bench with -o json), named ENGINE__MODEL__tTHREADS__TEST.json by the run scripts.
One row per (model, test, threads): t/s mean +- sd for each engine, then kiln/ik and
kiln/llama.cpp. An engine whose file is missing, empty or cut off shows as "-".
"""
import glob
import json
import os
import sys

ENGINES = ["kiln", "native", "ik", "llama.cpp"]


def load(path):
    """The file's test objects; a file cut off mid-array keeps the objects it finished."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().strip()
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        # llama-bench prints "[", then one object per finished test, then "]": close what is there.
        cut = text.rfind("}")
        try:
            data = json.loads(text[:cut + 1] + "]") if cut >= 0 else []
        except ValueError:
            return []
    return data if isinstance(data, list) else [data]


def test_label(row, fallback):
    if row.get("test"):
        return row["test"]  # ik_llama.cpp names its tests
    n_prompt, n_gen, depth = int(row.get("n_prompt", 0)), int(row.get("n_gen", 0)), int(row.get("n_depth", 0))
    if depth and n_gen and not n_prompt:
        return "tg%d@pp%d" % (n_gen, depth)  # kiln-bench's -gp
    if n_prompt and n_gen:
        return "pp%d+tg%d" % (n_prompt, n_gen)
    if n_prompt:
        return "pp%d" % n_prompt
    if n_gen:
        return "tg%d" % n_gen
    return fallback


def collect(out_dir):
    results = {}  # (model, test, threads) -> {engine: (mean, sd, extra)}
    notes = []
    for path in sorted(glob.glob(os.path.join(out_dir, "json", "*.json"))):
        parts = os.path.basename(path)[:-len(".json")].split("__")
        if len(parts) != 4:
            continue
        engine, model, threads, test = parts
        rows = load(path)
        if not rows:
            notes.append("%s: no finished test" % os.path.basename(path))
        for row in rows:
            try:
                mean, sd = float(row["avg_ts"]), float(row.get("stddev_ts", 0.0))
            except (KeyError, TypeError, ValueError):
                notes.append("%s: a row without avg_ts" % os.path.basename(path))
                continue
            extra = []
            if row.get("kernels"):
                extra.append(row["kernels"])
            if row.get("compute_fraction") not in (None, ""):
                extra.append("%.0f%% of %.0f GMAC/s" % (100 * float(row["compute_fraction"]),
                                                        float(row["compute_peak_gmacs"])))
            if row.get("roofline_fraction") not in (None, ""):
                extra.append("%.0f%% of %.1f GB/s" % (100 * float(row["roofline_fraction"]),
                                                       float(row["roofline_gbs"])))
            # Depth runs (gp...) are named by run.sh, cache type included: the engines label them differently.
            label = test if test.startswith("gp") else test_label(row, test)
            key = (model, label, int(row.get("n_threads", threads.lstrip("t"))))
            results.setdefault(key, {})[engine] = (mean, sd, ", ".join(extra))
    return results, notes


def ratio(by_engine, a, b):
    if a in by_engine and b in by_engine and by_engine[b][0] > 0:
        return "%.2f" % (by_engine[a][0] / by_engine[b][0])
    return "-"


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    results, notes = collect(sys.argv[1])
    lines = ["| model | test | threads | kiln t/s | kiln native t/s | ik_llama.cpp t/s | llama.cpp t/s | kiln/native | kiln/ik | kiln/llama.cpp | kiln notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    order = {}
    for key in sorted(results, key=lambda k: (order.get(k[0], 9), k[0], not k[1].startswith("pp"), k[1], k[2])):
        model, test, threads = key
        by_engine = results[key]
        cells = ["%.2f ± %.2f" % by_engine[e][:2] if e in by_engine else "-" for e in ENGINES]
        kiln_note = by_engine["kiln"][2] if "kiln" in by_engine else ""
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, test, threads, *cells, ratio(by_engine, "kiln", "native"), ratio(by_engine, "kiln", "ik"),
            ratio(by_engine, "kiln", "llama.cpp"),
            kiln_note))
    if not results:
        lines.append("| (no finished benchmark) | | | | | | | | | | |")
    if notes:
        lines += [""] + ["- " + note for note in notes]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
