#!/bin/bash
# The portable build's kiln-bench against one built for this machine (-DKILN_NATIVE=ON):
# pp512 and tg128 of each model, 1 thread pinned to one core, the two builds alternating
# test by test, ROUNDS rounds (default 6) of -r 3; prints per model and test the median
# t/s of each build and the median of the rounds' portable / native ratios (issue 18 asks
# for 3%: the rounds' ratios scatter more than that on a shared machine, their median less).
#   usage: bench/portable_vs_native.sh PORTABLE_KILN_BENCH NATIVE_KILN_BENCH MODEL.gguf...
#   e.g.   cmake -S . -B build-native -DKILN_NATIVE=ON -DKILN_TESTS=OFF && cmake --build build-native --target kiln-bench
#          bench/portable_vs_native.sh build/bench/kiln-bench build-native/bench/kiln-bench m-f16.gguf m-q8_0.gguf
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,8p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
portable=$1 native=$2; shift 2
ROUNDS=${ROUNDS:-6} CORE=${CORE:-$(($(nproc) - 1))}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for round in $(seq "$ROUNDS"); do
  for model in "$@"; do
    for test in pp512 tg128; do
      if [ $test = pp512 ]; then args=(-p 512 -n 0); else args=(-p 0 -n 128); fi
      for build in portable native; do
        bin=$portable; [ $build = native ] && bin=$native
        taskset -c "$CORE" "$bin" -m "$model" -t 1 -r 3 -o json "${args[@]}" 2>/dev/null \
          > "$out/$build.$round.$test.$(basename "$model")"
      done
    done
  done
  echo "round $round of $ROUNDS done" >&2
done
python3 - "$out" "$ROUNDS" "$@" <<'PY'
import json, os, statistics, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| model | test | portable t/s | native t/s | portable / native | rounds' ratios |")
print("|---|---|---:|---:|---:|---|")
for model in models:
    name = os.path.basename(model)
    for test in ("pp512", "tg128"):
        ts = {b: [json.load(open(os.path.join(out, "%s.%d.%s.%s" % (b, r, test, name))))[0]["avg_ts"]
                  for r in range(1, rounds + 1)] for b in ("portable", "native")}
        ratios = [p / n for p, n in zip(ts["portable"], ts["native"])]
        print("| %s | %s | %.1f | %.1f | %.3f | %.3f-%.3f |" % (name, test, statistics.median(ts["portable"]),
              statistics.median(ts["native"]), statistics.median(ratios), min(ratios), max(ratios)))
PY
