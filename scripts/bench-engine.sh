#!/usr/bin/env bash
# Engine overhead: Glassbox vs LangGraph vs Haystack 2, trivial nodes, on the
# seed-shaped 6-node topology and a 50-node fan-out/fan-in. Prints one table
# (Markdown) and checks the targets (exit 1 when one is missed).
#
#   scripts/bench-engine.sh              # 5 s per measurement
#   BENCH_SECS=10 scripts/bench-engine.sh
#   SHORT=1 PROFILE=dev scripts/bench-engine.sh   # smoke run: 0.2 s, no peers, no targets
#
# PROFILE: cargo profile of the Glassbox build (default bench, i.e. release).
# SHORT=1: a smoke run that checks the script works (scripts/check-script-order.sh):
# 0.2 s per measurement, the Python peers skipped, the targets not checked.
#
# Installs the Python peers (LangGraph, Haystack 2.x) into .venv-bench
# (gitignored) from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

short="${SHORT:-0}"
if [[ $short == 1 ]]; then secs="${BENCH_SECS:-0.2}"; else secs="${BENCH_SECS:-5}"; fi
profile="${PROFILE:-bench}"
out="${CARGO_TARGET_DIR:-target}/bench-engine"
mkdir -p "$out"

echo "== building and running the Glassbox benchmark ($profile)" >&2
BENCH_SECS="$secs" cargo bench -q --locked --profile "$profile" -p glassbox-engine --bench overhead \
  > "$out/glassbox.jsonl"

if [[ $short == 1 ]]; then
  echo "== SHORT=1: the Python peers and the targets are skipped" >&2
  python3 bench/engine_table.py --no-check "$out/glassbox.jsonl"
  exit 0
fi

if [ ! -x .venv-bench/bin/python ]; then
  echo "== creating .venv-bench" >&2
  python3 -m venv .venv-bench
fi
if ! .venv-bench/bin/python -c "import langgraph, haystack; from importlib.metadata import version; assert version(\"haystack-ai\").startswith(\"2.\")" 2>/dev/null; then
  echo "== installing langgraph and haystack-ai into .venv-bench" >&2
  .venv-bench/bin/pip install -q --disable-pip-version-check langgraph "haystack-ai>=2,<3"
fi

echo "== running the Python peers" >&2
HAYSTACK_TELEMETRY_ENABLED=False .venv-bench/bin/python bench/engine_peers.py --secs "$secs" > "$out/peers.jsonl"

echo "== machine: $(nproc) cores, $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)" >&2
python3 bench/engine_table.py "$out/glassbox.jsonl" "$out/peers.jsonl"
