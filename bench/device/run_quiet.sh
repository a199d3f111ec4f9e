#!/bin/bash
# The device machine, quiet figures (usage, from the repository root: OUT=DIR bash bench/device/run_quiet.sh): the figures that need a quiet machine, one benchmark at a time
# (sched.py with one slot): the portable kiln-bench against the one built for this CPU
# (issue 18, alternating, two rounds), 1.1B generation alone (bandwidth fractions), then
# the two engines' depth runs with a Q8_0 cache side by side on their own cores.
set -uo pipefail
export DEVBENCH_T0=$(date +%s.%N)
START=$SECONDS
: "${OUT:?set OUT}"
mkdir -p "$OUT/json" "$OUT/logs"
exec > >(tee -a "$OUT/run.log") 2>&1
ROOT=$PWD DEV=$PWD/devbench K=$PWD/devbench/kiln M=/tmp/m
step() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }
lscpu | grep -E '^(Model name|CPU\(s\))'
export DEVBENCH_LIBS=$DEV/lib
PY=; for c in python3 /usr/bin/python3; do env -u LD_LIBRARY_PATH $c -c 'import numpy' 2>/dev/null && { PY=$c; break; }; done
mkdir -p /tmp/devbench-bin $M
gzip -dc "$DEV/anchors/ik/llama-bench.gz" > /tmp/devbench-bin/ik-llama-bench && chmod +x /tmp/devbench-bin/ik-llama-bench
IK=/tmp/devbench-bin/ik-llama-bench LQ=$DEV/anchors/llama.cpp/llama-quantize
TOK="--tokenizer-from $DEV/vocab/ggml-vocab-llama-spm.gguf"
step models
taskset -c 2 env -u LD_LIBRARY_PATH $PY bench/make_llama_gguf.py --shape stories110m --type f16 $TOK --out $M/s110-f16.gguf > $OUT/logs/gen1.txt 2>&1 &
G1=$!
taskset -c 3 env -u LD_LIBRARY_PATH $PY bench/make_llama_gguf.py --shape tinyllama-1.1b --ctx 8192 --type f16 $TOK --out $M/tl-f16.gguf > $OUT/logs/gen2.txt 2>&1 &
G2=$!
QP=()
wait $G1
for q in Q8_0 Q4_0 Q4_K_M; do l=$(tr A-Z a-z <<<$q); LD_LIBRARY_PATH=$DEV/lib taskset -c 4,5 $LQ $M/s110-f16.gguf $M/s110-$l.gguf $q 2 > $OUT/logs/q1-$l.txt 2>&1 & QP+=($!); done
wait $G2
i=2; for q in Q4_K_M Q6_K Q8_0; do l=$(tr A-Z a-z <<<$q); LD_LIBRARY_PATH=$DEV/lib taskset -c $i-$((i + 3)) $LQ $M/tl-f16.gguf $M/tl-$l.gguf $q 4 > $OUT/logs/q2-$l.txt 2>&1 & QP+=($!); i=$((i + 4)); done
for p in "${QP[@]}"; do wait $p; done
step "models done"
KV="-ctk f16 -ctv f16"
A=$OUT/a.tsv B=$OUT/b.tsv C=$OUT/c.tsv; : > $A; : > $B; : > $C
for round in 1 2; do for m in s110-f16 s110-q8_0 s110-q4_0 s110-q4_k_m; do for test in pp512 tg128; do
  [ $test = pp512 ] && args="-p 512 -n 0" || args="-p 0 -n 128"
  for e in kiln native; do
    bin=$K/kiln-bench; [ $e = native ] && bin=$K/kiln-bench-native
    printf '%s\t1\tcpu\t%s\n' "${e}__${m}__t1__${test}__r$round" "$bin -m $M/$m.gguf -t 1 -r 3 -o json $args $KV" >> $A
  done; done; done; done
for t in 1 2; do for m in tl-q4_k_m tl-q6_k tl-q8_0; do
  printf '%s\t%s\tbw\t%s\n' "kiln__${m}__t${t}__tg128" $t "$K/kiln-bench -m $M/$m.gguf -t $t -r 2 -o json -p 0 -n 128 --roofline $KV" >> $B
done; done
printf '%s\t2\tbw\t%s\n' "kiln__tl-q8_0__t2__gp4096kv8" "$K/kiln-bench -m $M/tl-q8_0.gguf -t 2 -r 1 -o json -p 0 -n 0 -gp 4096,64 -ctk q8_0 -ctv q8_0" >> $C
printf '%s\t2\tbw\t%s\n' "ik__tl-q8_0__t2__gp4096kv8" "$IK -m $M/tl-q8_0.gguf -t 2 -r 1 -o json -p 0 -n 0 -gp 4096,64 -rtr 1 -fa 1 -ctk q8_0 -ctv q8_0" >> $C
step "phase A: portable vs native, one at a time"
env -u LD_LIBRARY_PATH $PY $ROOT/bench/device/sched.py $A $OUT "2,3" 160 400 1
step "phase B: 1.1B generation alone"
env -u LD_LIBRARY_PATH $PY $ROOT/bench/device/sched.py $B $OUT "2,3" 240 400 1
step "phase C: depth, Q8_0 cache, both engines side by side"
env -u LD_LIBRARY_PATH $PY $ROOT/bench/device/sched.py $C $OUT "4,5 8,9" 290 400 2
step summary
for f in $OUT/json/*.json; do
  env -u LD_LIBRARY_PATH $PY - "$f" <<'PY'
import json, os, sys
sys.path.insert(0, "bench/device")
from summary import load
name = os.path.basename(sys.argv[1])[:-5]
for r in load(sys.argv[1]):
    extra = ""
    if r.get("roofline_fraction") not in (None, ""):
        extra = " %.0f%% of %.1f GB/s" % (100 * float(r["roofline_fraction"]), float(r["roofline_gbs"]))
    print("%-40s %10.2f +- %6.2f%s" % (name, float(r["avg_ts"]), float(r["stddev_ts"]), extra))
PY
done | tee $OUT/summary.txt
# The device tool brings back at most 8 files: everything else travels as one archive.
tar -czf "$OUT/results.tar.gz" -C "$OUT" json logs 2>/dev/null && rm -rf "$OUT/json" "$OUT/logs"
step done
