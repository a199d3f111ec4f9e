#!/usr/bin/env bash
# oversubscription.sh: what it costs when the threads asked for do not get
# their CPUs. kiln's generation speed (greedy, the rate kiln prints) with -t
# at 1x, 2x and 4x the CPUs this process may use, on the machine as it is and
# then with one busy-looping process per CPU but one, as ratios to -t = CPUs
# on the machine as it is. A pool whose threads lose their cores waits at
# every barrier for the scheduler's next time slice; decoding then slows by
# 10x or more unless the pool gives those threads up (thread_governor.h).
#
#   bench/oversubscription.sh MODEL.gguf [KILN ...]
#
# Several kiln binaries (e.g. before and after a change) are run in turn for
# every setting and round, so slow drifts fall on each alike.
#   N_GEN=64  ROUNDS=3 (the median is shown)  TIMEOUT=300 (seconds per run;
#   a run that takes longer is reported as such, not waited for)
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
model=$1
shift
benches=("$@")
((${#benches[@]})) || benches=("$(dirname "$0")/../build/tools/kiln")
n_gen=${N_GEN:-64}
rounds=${ROUNDS:-3}
cpus=$(nproc)  # the affinity mask's count, as kiln's default

tg() {  # KILN THREADS -> median generation t/s of ROUNDS runs, or nothing after TIMEOUT seconds
    local out rates=()
    for ((r = 0; r < rounds; ++r)); do
        out=$(timeout "${TIMEOUT:-300}" "$1" -m "$model" -p "Once upon a time" -n "$n_gen" --temp 0 -t "$2" 2>&1 >/dev/null) || return 0
        rates+=("$(sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")")
    done
    printf '%s\n' "${rates[@]}" | sort -g | sed -n "$(((rounds + 1) / 2))p"
}

busy_pids=()
start_busy() { for ((i = 1; i < cpus; ++i)); do (while :; do :; done) & busy_pids+=($!); done; }
stop_busy() { ((${#busy_pids[@]})) && kill "${busy_pids[@]}" 2>/dev/null; wait "${busy_pids[@]}" 2>/dev/null || true; busy_pids=(); }
trap stop_busy EXIT

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cpus usable CPUs; model $(basename "$model"), $n_gen tokens, median of $rounds; load average $(cut -d' ' -f1 /proc/loadavg)"
echo "| kiln | machine | -t | t/s | vs -t $cpus as is |"
echo "|---|---|--:|--:|--:|"
declare -A base
for load in "as is" busy; do
    [[ $load == busy ]] && start_busy
    for t in "$cpus" $((2 * cpus)) $((4 * cpus)); do
        for b in "${benches[@]}"; do
            ts=$(tg "$b" "$t")
            [[ $load == "as is" && $t == "$cpus" ]] && base[$b]=$ts
            ratio=$([[ -n $ts && -n ${base[$b]:-} ]] && python3 -c "print('%.2f' % ($ts / ${base[$b]}))" || echo -)
            echo "| $b | $load$([[ $load == busy ]] && echo " ($((cpus - 1)) spinning)") | $t | ${ts:-over ${TIMEOUT:-300} s} | $ratio |"
        done
    done
    stop_busy
done
