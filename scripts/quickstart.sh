#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and generate
# Shakespeare with kiln's own model, models/shakespeare-char.gguf (a
# character-level GPT that kiln-train trained; models/README.md says how).
# Extra arguments go to kiln, e.g.: bash scripts/quickstart.sh -p "JULIET:" -n 300
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/tools/kiln -m models/shakespeare-char.gguf -p "ROMEO:" -n 400 "$@"
