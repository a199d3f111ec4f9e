#!/usr/bin/env bash
# Fuzzes the GGUF reader, then the tokenizers on prompt text (half the time),
# with libFuzzer (clang) under ASan+UBSan.
#   bash scripts/fuzz.sh [SECONDS]      (default 60)
# Findings (crash-*, timeout-*, oom-*) are written to build-fuzz/findings/ and
# make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined -DKILN_TESTS=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz-gguf-reader fuzz-gguf-seed fuzz-tokenizer
mkdir -p build-fuzz/corpus build-fuzz/findings
build-fuzz/tests/fuzz/fuzz-gguf-seed build-fuzz/corpus/sample.gguf
build-fuzz/tests/fuzz/fuzz-gguf-reader build-fuzz/corpus \
  -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1
mkdir -p build-fuzz/corpus-tokenizer
printf '\x00Hello world 12345 <|endoftext|> \xe4\xb8\xad\xe6\x96\x87' > build-fuzz/corpus-tokenizer/seed
build-fuzz/tests/fuzz/fuzz-tokenizer build-fuzz/corpus-tokenizer \
  -max_total_time="$(( (seconds + 1) / 2 ))" -max_len=1024 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1
