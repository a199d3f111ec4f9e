#!/bin/bash
# The device machine (an AVX-512 Xeon, with AMX where lent one, for minutes): the AMX kernel tests
# and timings (issue 24), the whole kiln-tests suite under the default kernel target and under
# KILN_KERNELS=avx512-vnni (issue 18), then pp512 of 1.1B TinyLlama-shaped files with the amx set
# against avx512-vnni, one benchmark at a time on cores 2-3.
#   usage (repository root; devbench/ made by FULL_TESTS=1 bench/device/build_kiln.sh and carried):
#     OUT=/some/dir bash bench/device/run_amx_suite.sh
# Stops starting new work after DEVBENCH_BUDGET seconds (default 400).
set -uo pipefail
: "${OUT:?set OUT}"
START=$SECONDS
BUDGET=${DEVBENCH_BUDGET:-400}
mkdir -p "$OUT/logs"
exec > >(tee -a "$OUT/run.log") 2>&1
step() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }
left() { echo $((BUDGET - (SECONDS - START))); }
ROOT=$PWD DEV=$PWD/devbench M=/tmp/m
export LD_LIBRARY_PATH=$DEV/lib
mkdir -p $M

step machine
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|L2 cache|L3 cache)'
echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_vnni|avx512_bf16|amx.*)$' | tr '\n' ' ')"
# kiln-tests starts kiln's programs and reads fixtures by the paths compiled into it.
tar -xf "$DEV/build-port.tar.xz" -C "$ROOT" 2>/dev/null ||
  env -u LD_LIBRARY_PATH python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$DEV/build-port.tar.xz" "$ROOT"
ln -sfn "$ROOT" /tmp/kiln-devbench-src
ln -sfn "$DEV/shared" /tmp/kiln-devbench-shared
B=$ROOT/build-port T=$B/tests/kiln-tests
"$B/tools/kiln" --version
PY=; for c in python3 /usr/bin/python3; do env -u LD_LIBRARY_PATH $c -c 'import numpy' 2>/dev/null && { PY=$c; break; }; done
echo "python with numpy: ${PY:-none}"

step "models (background): 1.1B q8_0, q4_0, f16 -> q4_k_m (kiln-convert)"
TOK="--tokenizer-from $DEV/vocab/ggml-vocab-llama-spm.gguf"
gen() { taskset -c $1 env -u LD_LIBRARY_PATH $PY bench/make_llama_gguf.py --shape tinyllama-1.1b $TOK --type $2 --out $M/tl-$2.gguf > $OUT/logs/gen-$2.txt 2>&1; }
(gen 4 q8_0) & G1=$!
(gen 5 q4_0) & G2=$!
(gen 6 f16 && taskset -c 6 "$B/convert/kiln-convert" $M/tl-f16.gguf -o $M/tl-q4_k_m.gguf --type q4_k_m > $OUT/logs/convert.txt 2>&1) & G3=$!

step "AMX tests ([amx], cores 2-3)"
KILN_KERNELS= taskset -c 2,3 "$T" "[amx]" -d yes > $OUT/amx-tests.txt 2>&1; echo "exit $?"
grep -E "skipped|passed|failed|FAILED|with expansion" $OUT/amx-tests.txt | head -20

step "kernel timings, 1 thread (core 2): amx, then avx512-vnni"
for set in amx avx512-vnni; do
  taskset -c 2 "$B/bench/kiln-kernel-bench" -t 1 -r 3 --kernels $set --types q8_0,q4_0,q4_K,q6_K --sweep \
    > $OUT/logs/kernel-bench-$set.txt 2>&1
  echo "== $set"; sed -n '/Batched matmul/,$p' $OUT/logs/kernel-bench-$set.txt | head -40
done

# The whole suite, sharded over 6 processes per kernel target (cores 4-15, beside the generators).
step "whole suite: default target and KILN_KERNELS=avx512-vnni, 6 shards each"
# (Catch2 reads each line as a test spec: commas in names are escaped.)
"$T" --list-test-names-only | sed '/^$/d; s/,/\\,/g' > /tmp/all-tests.txt
echo "$(wc -l < /tmp/all-tests.txt) test cases"
split -n r/6 -d /tmp/all-tests.txt /tmp/shard-
PIDS=()
for target in default avx512-vnni; do
  i=0 side=0; [ $target = default ] || side=1
  for f in /tmp/shard-0*; do
    core=$((4 + i * 2 + side))
    if [ $target = default ]; then envk=(env -u KILN_KERNELS); else envk=(env KILN_KERNELS=$target); fi
    (cd "$B/tests" && timeout $(( $(left) > 60 ? $(left) - 30 : 30 )) "${envk[@]}" taskset -c $core "$T" -f "$f" \
      > $OUT/logs/suite-$target-$i.txt 2>&1; echo $? > $OUT/logs/suite-$target-$i.rc) &
    PIDS+=($!); i=$((i + 1))
  done
done
for p in "${PIDS[@]}"; do wait $p; done
for target in default avx512-vnni; do
  echo "== suite under $target"
  for i in 0 1 2 3 4 5; do
    printf 'shard %s rc %s: %s\n' $i "$(cat $OUT/logs/suite-$target-$i.rc)" \
      "$(grep -E '^(All tests passed|test cases:)' $OUT/logs/suite-$target-$i.txt | tail -1)"
  done
  cat $OUT/logs/suite-$target-*.txt | grep -B2 -A12 -E "FAILED:" | head -150 > $OUT/logs/failures-$target.txt
  grep -h -A3 -E "^-{10,}" $OUT/logs/suite-$target-*.txt | grep -vE "^-|^\.\.\.|^$|^[^ ]*\.cpp:[0-9]+$" | sort -u | head -40
done

step "waiting for the models"
wait $G1 $G2 $G3
ls -la $M
cat $OUT/logs/convert.txt | tail -2

step "pp512, 2 threads (cores 2,3): amx against avx512-vnni, alternating"
for round in 1 2; do
  for m in tl-q8_0 tl-q4_0 tl-q4_k_m; do
    [ -f $M/$m.gguf ] || continue
    for set in amx avx512-vnni; do
      [ $(left) -gt 20 ] || { echo "budget spent"; break 3; }
      KILN_KERNELS=$set taskset -c 2,3 "$B/bench/kiln-bench" -m $M/$m.gguf -t 2 -p 512 -n 0 -r 2 --compute-roofline \
        -o jsonl > $OUT/logs/pp-$m-$set-$round.jsonl 2> $OUT/logs/pp-$m-$set-$round.err
      printf '%s %s round %s: %s\n' $m $set $round "$(grep -o '"avg_ts": *[0-9.]*\|"compute_fraction": *[0-9.e-]*' $OUT/logs/pp-$m-$set-$round.jsonl | tr '\n' ' ')"
    done
  done
done
grep -h "compute peak" $OUT/logs/pp-*-1.err | sort -u

# Issue 18: the portable build against kiln-bench built for this CPU (-march=sapphirerapids), 1 thread.
if grep -qw amx_int8 /proc/cpuinfo && [ -x "$DEV/kiln/kiln-bench-native" ]; then
  step "portable against native, tl-q8_0 and tl-q4_0, 1 thread (core 2), alternating"
  for round in 1 2; do for m in tl-q8_0 tl-q4_0; do
    for bin in kiln-bench kiln-bench-native; do
      [ $(left) -gt 15 ] || { echo "budget spent"; break 2; }
      exe=$B/bench/kiln-bench; [ $bin = kiln-bench ] || exe=$DEV/kiln/$bin
      taskset -c 2 "$exe" -m $M/$m.gguf -t 1 -p 128 -n 32 -r 2 -o jsonl > $OUT/logs/native-$m-$bin-$round.jsonl 2>/dev/null
      printf '%s %s round %s: %s\n' $m $bin $round "$(grep -o '"avg_ts": *[0-9.]*' $OUT/logs/native-$m-$bin-$round.jsonl | tr '\n' ' ')"
    done
  done; done
fi
step done
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
