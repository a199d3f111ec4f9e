#!/usr/bin/env bash
# Configures and builds kiln (Release, native code) into build/.
#   bash scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
