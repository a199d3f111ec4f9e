#!/usr/bin/env bash
# compare.sh: kiln-bench against a llama-bench (llama.cpp's, or a fork's such
# as ik_llama.cpp's) on the same GGUF files and threads, run alternately, and
# the ratio kiln / other engine for each test.
#
#   bench/compare.sh LLAMA_BENCH_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#
# LLAMA_BENCH_BUILD_DIR is the user's own build (the folder holding
# bin/llama-bench, or llama-bench itself); this script never downloads or
# builds it. Both engines are read through `-o json`, which every llama-bench
# has (ik_llama.cpp's lacks jsonl). Settings come from the environment:
#   THREADS=1,2   N_PROMPT=128   N_GEN=64   REPS=5   ROUNDS=1   (N_PROMPT/N_GEN 0: none)
#   GP=4096,64 (also generation at depth: TG tokens after an untimed PP-token
#   prompt, ik_llama.cpp's -gp; the other engine must have it: ik_llama.cpp)
#   CACHE_TYPE=f16 (the KV cache type both engines use: -ctk/-ctv; f16 is
#   llama.cpp's default, f32 kiln's)
#   ENGINE=llama.cpp (the other engine's name in the table)
#   ENGINE_ARGS="" (extra llama-bench flags, e.g. "-rtr 1" for ik_llama.cpp's
#   run-time repacking, its fastest CPU setting)
#   KILN_ARGS="--roofline" (extra kiln-bench flags; --roofline adds the
#   fraction of the measured read bandwidth to every tg figure)
#   KILN_BENCH=<repo>/build/bench/kiln-bench   PYTHON=python3
# Each round runs, for every model and thread count, llama-bench then
# kiln-bench (pp and tg each), so slow drifts of a shared machine fall on both
# engines alike; with ROUNDS > 1 the samples of all rounds are pooled. The load
# average is printed before every run: compare only figures from a quiet machine.
set -euo pipefail

usage() {
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}
[[ $# -ge 2 ]] || usage
[[ $1 == -h || $1 == --help ]] && usage

llama_dir=$1
shift
if [[ -x $llama_dir/bin/llama-bench ]]; then
    llama_bench=$llama_dir/bin/llama-bench
elif [[ -x $llama_dir/llama-bench ]]; then
    llama_bench=$llama_dir/llama-bench
else
    echo "compare.sh: no llama-bench in $llama_dir (expected $llama_dir/bin/llama-bench)" >&2
    exit 1
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
kiln_bench=${KILN_BENCH:-$repo/build/bench/kiln-bench}
if [[ ! -x $kiln_bench ]]; then
    echo "compare.sh: no kiln-bench at $kiln_bench (build it: cmake --build build --target kiln-bench)" >&2
    exit 1
fi
for m in "$@"; do
    [[ -f $m ]] || { echo "compare.sh: no model file '$m'" >&2; exit 1; }
done

threads=${THREADS:-1,2}
n_prompt=${N_PROMPT:-128}
n_gen=${N_GEN:-64}
reps=${REPS:-5}
rounds=${ROUNDS:-1}
cache_type=${CACHE_TYPE:-f16}
gp=()
[[ -n ${GP:-} ]] && gp=(-gp "$GP")
engine=${ENGINE:-llama.cpp}
read -r -a engine_args <<<"${ENGINE_ARGS:-}"
read -r -a kiln_args <<<"${KILN_ARGS:---roofline}"
python=${PYTHON:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "compare.sh: llama-bench $llama_bench; kiln-bench $kiln_bench" >&2
echo "compare.sh: threads $threads, pp $n_prompt, tg $n_gen, $reps repetitions, $rounds round(s), KV cache $cache_type" >&2
echo "compare.sh: $engine flags: ${engine_args[*]:-(none)}; kiln flags: ${kiln_args[*]:-(none)}" >&2
run=0
load_before=$(load)
for ((round = 1; round <= rounds; ++round)); do
    for m in "$@"; do
        for t in ${threads//,/ }; do
            run=$((run + 1))
            echo "compare.sh: round $round, $(basename "$m"), $t thread(s): $engine llama-bench (load $(load))" >&2
            "$llama_bench" -m "$m" -t "$t" -p "$n_prompt" -n "$n_gen" ${gp[@]+"${gp[@]}"} -r "$reps" -ctk "$cache_type" \
                -ctv "$cache_type" ${engine_args[@]+"${engine_args[@]}"} -o json >"$work/other.$run.json" 2>>"$work/other.err" ||
                { cat "$work/other.err" >&2; echo "compare.sh: llama-bench failed" >&2; exit 1; }
            echo "compare.sh: round $round, $(basename "$m"), $t thread(s): kiln-bench (load $(load))" >&2
            "$kiln_bench" -m "$m" -t "$t" -p "$n_prompt" -n "$n_gen" ${gp[@]+"${gp[@]}"} -r "$reps" -ctk "$cache_type" \
                -ctv "$cache_type" ${kiln_args[@]+"${kiln_args[@]}"} -o json >"$work/kiln.$run.json" 2>>"$work/kiln.err" ||
                { cat "$work/kiln.err" >&2; echo "compare.sh: kiln-bench failed" >&2; exit 1; }
        done
    done
done
load_after=$(load)

"$python" - "$work" "$load_before" "$load_after" "$engine" <<'EOF'
import glob, json, math, os, sys

def read(pattern):
    # (file, threads, test) -> pooled samples_ts, and the first record seen
    out = {}
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for r in json.load(f):
                p, n, depth = r["n_prompt"], r["n_gen"], r.get("n_depth", 0)
                if p > 0 and n > 0:  # the other engine's -gp record (only -gp is passed, never -pg)
                    test = f"tg{n}@pp{p}"
                elif depth > 0:      # kiln's: the prompt is untimed depth
                    test = f"tg{n}@pp{depth}"
                else:
                    test = f"pp{p}" if p > 0 else f"tg{n}"
                key = (r["model_filename"], r["n_threads"], test)
                entry = out.setdefault(key, {"samples": [], "record": r})
                entry["samples"] += r["samples_ts"]
    return out

def stats(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd

llama, kiln = read(os.path.join(sys.argv[1], "other.*.json")), read(os.path.join(sys.argv[1], "kiln.*.json"))
engine = sys.argv[4]
print(f"load average before: {sys.argv[2]}, after: {sys.argv[3]}")
first = next(iter(kiln.values()))["record"]
print(f"CPU: {first['cpu_info']}; kiln kernels: {first.get('kernels', '?')}")
print()
print(f"| model | threads | test | {engine} t/s | kiln t/s | kiln / {engine} | kiln's share of read bandwidth |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for key in kiln:
    model, threads, test = key
    k_mean, k_sd = stats(kiln[key]["samples"])
    name = f"{kiln[key]['record']['model_type']} ({os.path.basename(model)})"
    fraction = kiln[key]["record"].get("roofline_fraction")
    share = f"{100 * fraction:.1f}%" if test.startswith("tg") and fraction else "-"
    if key in llama:
        l_mean, l_sd = stats(llama[key]["samples"])
        print(f"| {name} | {threads} | {test} | {l_mean:.2f} ± {l_sd:.2f} | {k_mean:.2f} ± {k_sd:.2f} | {k_mean / l_mean:.2f} | {share} |")
    else:
        print(f"| {name} | {threads} | {test} | (missing) | {k_mean:.2f} ± {k_sd:.2f} | - | {share} |")
EOF
