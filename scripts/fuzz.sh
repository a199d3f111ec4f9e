#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes (tests/fuzz/: GGUF, zip/.pt, pickles,
# safetensors, Hugging Face config.json / tokenizer.json / tokenizer_config.json,
# SentencePiece, llama2.c model and tokenizer, nanoGPT meta.pkl, prompt text,
# chat templates, prompt caches, kiln-server's request bodies) with libFuzzer (clang) under ASan+UBSan, one target at a time.
#   bash scripts/fuzz.sh [SECONDS [TARGET...]]      (default 60, every target)
# The targets share 2.5 x SECONDS of fuzzing (at least 5 s each): `fuzz.sh 60`
# (CI) fuzzes for about 2.5 minutes in all, `fuzz.sh 1800` about 6 minutes per
# target. TARGET names a few (e.g. `fuzz.sh 60 chat-template`): they then
# share the time. Each starts from its committed seeds (tests/fuzz/corpus/) and
# the corpus it grew before (build-fuzz/corpus/), with its dictionary
# (tests/fuzz/dict/), -rss_limit_mb=2048 and -timeout=10. Findings (crash-*,
# timeout-*, oom-*, leak-*) go to build-fuzz/findings/ and make the script fail
# once every target has run, as does any input of tests/fuzz/regressions/ that
# fails again. Reproduce one with
#   build-fuzz/tests/fuzz/fuzz-TARGET build-fuzz/findings/TARGET-crash-...
# KILN_FUZZ_FLAGS adds libFuzzer flags, e.g. '-fork=1 -ignore_crashes=1
# -ignore_ooms=1 -ignore_timeouts=1' to keep fuzzing past findings in long runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

# name | -max_len | seed folder | dictionary
all_targets=(
  "gguf-reader|4096|build-fuzz/seeds/gguf_reader|tests/fuzz/dict/gguf.dict"
  "tokenizer|1024|tests/fuzz/corpus/tokenizer|"
  "chat-template|16384|tests/fixtures/chat_templates|tests/fuzz/dict/chat_template.dict"
  "zip-archive|16384|tests/fuzz/corpus/zip_archive|tests/fuzz/dict/zip.dict"
  "torch-pickle|16384|tests/fuzz/corpus/torch_pickle|tests/fuzz/dict/pickle.dict"
  "safetensors|4096|tests/fuzz/corpus/safetensors|tests/fuzz/dict/safetensors.dict"
  "hf-config|4096|tests/fuzz/corpus/hf_config|tests/fuzz/dict/hf_config.dict"
  "hf-tokenizer|16384|tests/fuzz/corpus/hf_tokenizer|tests/fuzz/dict/hf_tokenizer.dict"
  "hf-tokenizer-config|4096|tests/fuzz/corpus/hf_tokenizer_config|tests/fuzz/dict/hf_tokenizer.dict"
  "spm-model|4096|tests/fuzz/corpus/spm_model|tests/fuzz/dict/spm_model.dict"
  "llama2c|8192|tests/fuzz/corpus/llama2c|tests/fuzz/dict/llama2c.dict"
  "llama2c-tokenizer|4096|tests/fuzz/corpus/llama2c_tokenizer|tests/fuzz/dict/llama2c.dict"
  "nanogpt-meta|4096|tests/fuzz/corpus/nanogpt_meta|tests/fuzz/dict/pickle.dict"
  "prompt-cache|4096|tests/fuzz/corpus/prompt_cache|"
  "server-request|8192|tests/fuzz/corpus/server_request|tests/fuzz/dict/server_request.dict"
)
targets=()
if (($# == 0)); then
  targets=("${all_targets[@]}")
else
  for wanted in "$@"; do
    found=
    for t in "${all_targets[@]}"; do [[ ${t%%|*} == "$wanted" ]] && targets+=("$t") && found=1; done
    [[ -n $found ]] || { echo "fuzz.sh: no target '$wanted' (targets: ${all_targets[*]%%|*})" >&2; exit 2; }
  done
fi
share=$(( seconds * 5 / 2 / ${#targets[@]} ))
((share >= 5)) || share=5

cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined -DKILN_TESTS=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target kiln-fuzzers
mkdir -p build-fuzz/seeds/gguf_reader build-fuzz/findings build-fuzz/logs
build-fuzz/tests/fuzz/fuzz-gguf-seed build-fuzz/seeds/gguf_reader/sample.gguf

failed=()
for t in "${targets[@]}"; do
  IFS='|' read -r name max_len seeds dict <<<"$t"
  mkdir -p "build-fuzz/corpus/$name"
  log="build-fuzz/logs/$name.log"
  # Inputs that once failed are run first, each once.
  regressions=(tests/fuzz/regressions/"${name//-/_}"-*)
  if [[ -e ${regressions[0]} ]] && ! build-fuzz/tests/fuzz/fuzz-"$name" -rss_limit_mb=2048 -timeout=10 \
      "${regressions[@]}" >"build-fuzz/logs/$name-regressions.log" 2>&1; then
    failed+=("$name (a regression: build-fuzz/logs/$name-regressions.log)")
    continue
  fi
  echo "== fuzz-$name: ${share} s (log: $log)"
  findings() { find build-fuzz/findings -regextype egrep -regex ".*/$name-(crash|leak|timeout|oom)-.*" | wc -l; }
  before=$(findings)
  # The first folder receives what the run finds; the seeds are only read.
  rc=0
  build-fuzz/tests/fuzz/fuzz-"$name" "build-fuzz/corpus/$name" "$seeds" ${dict:+-dict="$dict"} \
    -max_total_time="$share" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="build-fuzz/findings/$name-" -print_final_stats=1 ${KILN_FUZZ_FLAGS:-} >"$log" 2>&1 || rc=$?
  # With -ignore_crashes (fork mode) libFuzzer exits 0 after findings: count the files too.
  if ((rc != 0)) || (( $(findings) > before )); then
    failed+=("$name")
    grep -E 'ERROR|SUMMARY|Test unit written|terminate called|what\(\)' "$log" | head -8 | sed 's/^/   /'
  else
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|cov: ' "$log" | tail -3 | sed 's/^/   /'
  fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: findings from ${failed[*]} (in build-fuzz/findings/; logs in build-fuzz/logs/)" >&2
  exit 1
fi
echo "fuzz.sh: no findings in ${#targets[@]} targets"
