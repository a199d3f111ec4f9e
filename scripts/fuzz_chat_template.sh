#!/usr/bin/env bash
# Fuzzes the chat template interpreter (formats/chat/) with libFuzzer (clang)
# under ASan+UBSan, starting from the templates in tests/fixtures/chat_templates/.
#   bash scripts/fuzz_chat_template.sh [SECONDS]      (default 60)
# Findings (crash-*, timeout-*, oom-*) are written to build-fuzz/chat-findings/
# and make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined -DKILN_TESTS=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz-chat-template
mkdir -p build-fuzz/chat-corpus build-fuzz/chat-findings
cp tests/fixtures/chat_templates/*.jinja build-fuzz/chat-corpus/
build-fuzz/tests/fuzz/fuzz-chat-template build-fuzz/chat-corpus \
  -dict=tests/fuzz/chat_template.dict -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build-fuzz/chat-findings/ -print_final_stats=1
