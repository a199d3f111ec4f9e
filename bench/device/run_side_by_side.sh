#!/bin/bash
# kiln against ik_llama.cpp and llama.cpp on the device machine (an AVX-512 Xeon lent for minutes):
# the benchmarks run side by side (bench/device/sched.py), each pinned to its own two cores, at most
# BW_LIMIT generation runs at once: the 1.1B TinyLlama-shaped files in five types and the 110M
# files, 1 and 2 threads, plus kiln-bench built for that CPU alone (kiln-bench-native).
#   usage (repository root, with devbench/ built by bench/device/build_*.sh and carried):
#     OUT=/some/dir bash bench/device/run_side_by_side.sh
set -uo pipefail
T0=$(date +%s.%N); export DEVBENCH_T0=$T0
START=$SECONDS
: "${OUT:?set OUT}"
mkdir -p "$OUT/json" "$OUT/logs"
exec > >(tee -a "$OUT/run.log") 2>&1
ROOT=$PWD
DEV=$ROOT/devbench
K=${KILN_DIR:-$DEV/kiln}
SHAPE_SMALL=${SHAPE_SMALL:---shape stories110m}
SHAPE_BIG=${SHAPE_BIG:---shape tinyllama-1.1b --ctx 8192}
BUDGET=${DEVBENCH_BUDGET:-390}
HARD=${DEVBENCH_HARD:-470}
BW_LIMIT=${BW_LIMIT:-4}
M=/tmp/m
step() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }

step machine
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L2 cache|L3 cache|CPU max MHz)'
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo)
echo "SIMD flags: $(tr ' ' '\n' <<<"$FLAGS" | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx512_fp16|amx.*)$' | tr '\n' ' ')"
grep -qw avx512_vnni <<<"$FLAGS" || [ "${DEVBENCH_DRY:-0}" = 1 ] || { echo "devbench: no AVX-512 VNNI here; stopping"; exit 3; }
export DEVBENCH_LIBS=$DEV/lib
if [ "${DEVBENCH_DRY:-0}" = 1 ]; then taskset() { shift 2; "$@"; }; export DEVBENCH_NOPIN=1; fi
PY=
for c in python3 /usr/bin/python3; do env -u LD_LIBRARY_PATH $c -c 'import numpy' 2>/dev/null && { PY=$c; break; }; done
echo "python: $PY"
mkdir -p /tmp/devbench-bin
gzip -dc "$DEV/anchors/ik/llama-bench.gz" > /tmp/devbench-bin/ik-llama-bench && chmod +x /tmp/devbench-bin/ik-llama-bench
IK=${IK_BENCH:-/tmp/devbench-bin/ik-llama-bench} LB=${LLAMA_BENCH:-$DEV/anchors/llama.cpp/llama-bench} LQ=${LLAMA_QUANTIZE:-$DEV/anchors/llama.cpp/llama-quantize}
run_lib() { LD_LIBRARY_PATH=$DEV/lib "$@"; }
for b in kiln-bench kiln-bench-native; do run_lib "$K/$b" --version 2>&1 | head -3; done | tee "$OUT/kiln-version.txt"

# Kernel tests on core 1, in the background.
[ -e /tmp/kiln-devbench-src ] || ln -s "$ROOT" /tmp/kiln-devbench-src
TAGS="[kernels],[kquant_kernels],[legacy_kernels],[quant],[half],[interleave],[attention]"
step "kiln-tests $TAGS (background, core 1, timeout 200)"
LD_LIBRARY_PATH=$DEV/lib taskset -c 1 timeout 200 "$K/kiln-tests" "$TAGS" > "$OUT/tests.txt" 2>&1 &
TESTS=$!

step "models"
mkdir -p $M
TOK="--tokenizer-from $DEV/vocab/ggml-vocab-llama-spm.gguf"
taskset -c 2 env -u LD_LIBRARY_PATH $PY bench/make_llama_gguf.py $SHAPE_SMALL --type f16 $TOK --out $M/s110-f16.gguf > "$OUT/logs/gen-110m.txt" 2>&1 &
G110=$!
taskset -c 3 env -u LD_LIBRARY_PATH $PY bench/make_llama_gguf.py $SHAPE_BIG --type f16 $TOK --out $M/tl-f16.gguf > "$OUT/logs/gen-1b.txt" 2>&1 &
G1B=$!
QP=()
wait $G110 || echo "devbench: the 110M generator failed: $(tail -2 $OUT/logs/gen-110m.txt)"
for q in Q8_0 Q4_0 Q4_K_M; do
  l=$(tr A-Z a-z <<<$q)
  run_lib taskset -c 4,5 $LQ $M/s110-f16.gguf $M/s110-$l.gguf $q 2 > "$OUT/logs/q-s110-$l.txt" 2>&1 & QP+=($!)
done
wait $G1B || echo "devbench: the 1.1B generator failed: $(tail -2 $OUT/logs/gen-1b.txt)"
step "1.1B f16 written"
i=2
for q in Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0; do
  l=$(tr A-Z a-z <<<$q)
  run_lib taskset -c $i-$((i + 2)) $LQ $M/tl-f16.gguf $M/tl-$l.gguf $q 3 > "$OUT/logs/q-tl-$l.txt" 2>&1 & QP+=($!)
  i=$((i + 3))
done
for p in "${QP[@]}"; do wait $p || echo "devbench: a llama-quantize run failed (pid $p)"; done
ls -la $M | awk '{print $5, $9}'
step "models done"

# The compute peaks kiln-bench measures (fp32, int8, AMX where the CPU has it), 1 and 2 threads,
# alone before anything else starts: they go to stderr, which is kept whole here.
step "compute peaks (kiln-bench --compute-roofline)"
run_lib taskset -c 2,3 "$K/kiln-bench" -m $M/s110-q8_0.gguf -t 1,2 -p 64 -n 0 -r 1 --compute-roofline \
  > "$OUT/logs/peaks.md" 2> "$OUT/peaks.txt"; grep "compute peak" "$OUT/peaks.txt"

# ---------------------------------------------------------------- the jobs, most wanted first
J=$OUT/jobs.tsv; : > $J
KV="-ctk f16 -ctv f16"
job() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> $J; }
eng() {  # ENGINE MODEL THREADS TEST REPS
  local e=$1 m=$2 t=$3 test=$4 r=$5 args cls=cpu bin
  case $test in
    tg128) args="-p 0 -n 128"; cls=bw ;;
    pp512) args="-p 512 -n 0" ;;
    gp4096) args="-p 0 -n 0 -gp 4096,64"; cls=bw ;;
    gp4096kv8) args="-p 0 -n 0 -gp 4096,64"; cls=bw ;;
  esac
  local kv=$KV; [ $test = gp4096kv8 ] && kv="-ctk q8_0 -ctv q8_0"
  case $e in
    kiln) bin="$K/kiln-bench"; [ $cls = bw ] && [ ${test:0:2} = tg ] && args+=" --roofline"; [ $test = pp512 ] && args+=" --compute-roofline" ;;
    native) bin="$K/kiln-bench-native"; [ $test = pp512 ] && args+=" --compute-roofline" ;;
    ik) bin="$IK"; args+=" -rtr 1 -fa 1" ;;
    llama.cpp) bin="$LB"; args+=" -fa 0" ;;
  esac
  job "${e}__${m}__t${t}__${test}" $t $cls "$bin -m $M/$m.gguf -t $t -r $r -o json $args $kv"
}
# Issue 17: generation at depth, 2 threads.
for e in kiln ik; do eng $e tl-q8_0 2 gp4096 1; done
# Issue 18: the portable build against the native one, 110M files, 1 thread.
for m in s110-q4_k_m s110-q8_0 s110-q4_0 s110-f16; do for test in pp512 tg128; do
  for e in kiln native; do eng $e $m 1 $test 5; done; done; done
# Issue 13: the 1.1B files.
for t in 1 2; do for m in tl-q4_k_m tl-q5_k_m tl-q6_k tl-q8_0 tl-q4_0; do for test in tg128 pp512; do
  for e in kiln ik llama.cpp; do eng $e $m $t $test 2; done; done; done
  [ $t = 1 ] && { for e in kiln ik; do eng $e tl-q4_k_m 2 gp4096 1; eng $e tl-q8_0 2 gp4096kv8 1; done; }
done
# Issue 13: F16 prompts against ik_llama.cpp (whose -rtr 1 makes F16 weights BF16) and llama.cpp.
for e in kiln ik llama.cpp; do eng $e s110-f16 1 pp512 3; done
# Issue 13: the 110M files against the other engines.
for t in 1 2; do for m in s110-q4_k_m s110-q8_0 s110-q4_0; do for test in tg128 pp512; do
  for e in ik llama.cpp; do eng $e $m $t $test 3; done; [ $t = 2 ] && eng kiln $m 2 $test 3; done; done; done
step "$(wc -l < $J) jobs"

SLOTS=${SLOTS:-"2,3 4,5 6,7 8,9 10,11 12,13 14,15"}
env -u LD_LIBRARY_PATH $PY "$ROOT/bench/device/sched.py" $J "$OUT" "$SLOTS" $BUDGET $HARD $BW_LIMIT
wait $TESTS; echo "kiln-tests exit $?: $(tail -2 "$OUT/tests.txt" | tr '\n' ' ')"
step summary
env -u LD_LIBRARY_PATH $PY "$ROOT/bench/device/summary.py" "$OUT" | tee "$OUT/summary.md"
# The device tool brings back at most 8 files: everything else travels as one archive.
tar -czf "$OUT/results.tar.gz" -C "$OUT" json logs 2>/dev/null && rm -rf "$OUT/json" "$OUT/logs"
step done
