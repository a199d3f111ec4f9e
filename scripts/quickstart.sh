#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and generate
# a story. The model is the shared test checkpoint ../shared/models/stories260K.gguf
# (a 260K-parameter Llama trained on TinyStories); kiln does not ship its own yet.
# Extra arguments go to kiln, e.g.: bash scripts/quickstart.sh -p "The dog" -n 64
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/tools/kiln -m ../shared/models/stories260K.gguf -p "Once upon a time" "$@"
