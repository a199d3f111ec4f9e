#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer (clang) under ASan+UBSan.
#   bash scripts/fuzz.sh [SECONDS]      (default 60)
# Findings (crash-*, timeout-*, oom-*) are written to build-fuzz/findings/ and
# make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined -DKILN_TESTS=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz-gguf-reader fuzz-gguf-seed
mkdir -p build-fuzz/corpus build-fuzz/findings
build-fuzz/tests/fuzz/fuzz-gguf-seed build-fuzz/corpus/sample.gguf
build-fuzz/tests/fuzz/fuzz-gguf-reader build-fuzz/corpus \
  -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1
