#!/usr/bin/env bash
# quant_quality.sh: what each llama-quantize mix costs a model, measured by
# kiln-perplexity and llama-perplexity side by side on the same files and text.
#
#   bench/quant_quality.sh LLAMA_CPP_BUILD_DIR MODEL-F16-or-F32.gguf TEXT [MIX ...]
#
# For every MIX (default: q8_0 q6_k q5_k_m q4_k_m q4_0 q3_k_m q2_k) the model is
# quantized twice, by llama.cpp's llama-quantize and by kiln-convert --type, and
# the two files' tensors (names, shapes, types, bytes) are compared. Then both engines score llama-quantize's
# file the llama-perplexity way (windows of CTX tokens, second halves scored)
# against the unquantized model's logits: PPL, mean KL divergence and how often
# the top token is the same. Settings: CTX=128 CHUNKS=40 THREADS=2
# KILN_BUILD=<repo>/build. Files go to a temporary folder, removed at the end.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
llama_dir=$1 model=$2 text=$3
shift 3
mixes=("$@")
[[ ${#mixes[@]} -gt 0 ]] || mixes=(q8_0 q6_k q5_k_m q4_k_m q4_0 q3_k_m q2_k)
bin=$llama_dir/bin
[[ -x $bin/llama-quantize && -x $bin/llama-perplexity ]] || { echo "quant_quality.sh: no llama-quantize/llama-perplexity in $bin" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN_BUILD:-$repo/build}
ctx=${CTX:-128} chunks=${CHUNKS:-40} threads=${THREADS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

final() { grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$1" | sed 's/Final estimate: PPL = //'; }
field() { grep -m1 "^$2" "$1" | sed 's/[^:]*: *//'; }
# Whether two GGUF files hold the same tensors (names, shapes, types, bytes);
# their metadata may differ (llama-quantize also records its own keys).
same_tensors() {
    /usr/bin/python3 - "$1" "$2" "$repo/tests/reference" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import gguf_io
# ggml type id -> (elements per block, bytes per block) of the types a mix writes
SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
         11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18), 23: (256, 136), 30: (1, 2)}
def tensors(path):
    f = gguf_io.read_gguf(path, load_tensors=False)
    raw = open(path, "rb").read()
    out = {}
    for t in f.tensor_infos.values():
        n = 1
        for d in t.dims:
            n *= d
        block, size = SIZES.get(t.ggml_type, (0, 0))
        start = f.data_offset + t.offset
        out[t.name] = (t.dims, t.ggml_type, raw[start:start + n // block * size] if block else None)
    return out
# llama-quantize writes the tensors sorted by layer and name, kiln in the input's order: compare by name.
same = tensors(sys.argv[1]) == tensors(sys.argv[2])
print("identical tensors" if same else "tensors differ")
PY
}

"$bin/llama-perplexity" -m "$model" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" -t "$threads" \
    --kl-divergence-base "$work/llama.base" >"$work/llama-base.log" 2>&1
"$kiln/tools/kiln-perplexity" -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" \
    --kl-base "$work/kiln.base" >"$work/kiln-base.log" 2>&1
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); model $(basename "$model"), text $(basename "$text"), -c $ctx, $chunks chunks"
echo "unquantized: llama.cpp PPL $(final "$work/llama-base.log"), kiln PPL $(final "$work/kiln-base.log")"
echo
echo "| mix | kiln-convert vs llama-quantize | llama.cpp PPL | kiln PPL | kiln/llama.cpp | llama.cpp mean KLD | kiln mean KLD | llama.cpp same top | kiln same top |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for mix in "${mixes[@]}"; do
    upper=$(echo "$mix" | tr a-z A-Z)
    "$bin/llama-quantize" "$model" "$work/$mix.gguf" "$upper" "$threads" >/dev/null 2>&1
    if "$kiln/convert/kiln-convert" "$model" -o "$work/kiln-$mix.gguf" --type "$mix" >/dev/null 2>"$work/convert.err"; then
        same=$(same_tensors "$work/$mix.gguf" "$work/kiln-$mix.gguf")
    else
        same="kiln-convert: $(head -c 80 "$work/convert.err")"
    fi
    "$bin/llama-perplexity" -m "$work/$mix.gguf" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" -t "$threads" \
        --kl-divergence-base "$work/llama.base" --kl-divergence >"$work/llama-$mix.log" 2>&1 || true
    "$kiln/tools/kiln-perplexity" -m "$work/$mix.gguf" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" \
        --kl-base "$work/kiln.base" --kl-divergence >"$work/kiln-$mix.log" 2>&1 || true
    lp=$(field "$work/llama-$mix.log" "Mean PPL(Q)" | awk '{print $1}')
    kp=$(field "$work/kiln-$mix.log" "Mean PPL(Q)" | awk '{print $1}')
    ratio=$(awk -v a="$kp" -v b="$lp" 'BEGIN { if (b > 0) printf "%.5f", a / b; else print "-" }')
    echo "| $mix | $same | $lp | $kp | $ratio | $(field "$work/llama-$mix.log" "Mean    KLD") | $(field "$work/kiln-$mix.log" "Mean    KLD") | $(field "$work/llama-$mix.log" "Same top p") | $(field "$work/kiln-$mix.log" "Same top p") |"
done
