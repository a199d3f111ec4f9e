#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and show what
# a model holds. (Until kiln generates text it inspects a model; the model is the
# shared test checkpoint ../shared/models/stories260K.gguf, not one kiln ships.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/convert/kiln-convert inspect "${1:-../shared/models/stories260K.gguf}"
