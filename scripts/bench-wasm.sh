#!/usr/bin/env bash
# Custom steps: per-call cost of a `wasm` node, side by side with the same
# logic as a built-in kind and as an `http` node calling a local service
# (crates/nodes/benches/wasm.rs). Prints one Markdown table, P50/P95/P99.
#
#   scripts/bench-wasm.sh                 # 5 s per row
#   BENCH_SECS=10 scripts/bench-wasm.sh
#   SHORT=1 PROFILE=dev scripts/bench-wasm.sh   # smoke run: 0.2 s per row
#
# PROFILE: cargo profile of the measured build (default bench, i.e. release).
# Builds the example components first (scripts/build-wasm-examples.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${SHORT:-0}" == 1 ]]; then secs="${BENCH_SECS:-0.2}"; else secs="${BENCH_SECS:-5}"; fi
profile="${PROFILE:-bench}"

echo "== building the example components" >&2
./scripts/build-wasm-examples.sh >&2
echo "== building and running the benchmark ($profile, ${secs} s per row)" >&2
echo "== machine: $(nproc) cores, $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)" >&2
BENCH_SECS="$secs" cargo bench -q --locked --profile "$profile" -p glassbox-nodes --bench wasm
