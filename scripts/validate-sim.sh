#!/usr/bin/env bash
# Validates the serving simulator (docs/planner.md, "Validation of the
# simulator"; issue #17 item 2). One command:
#
#  1. `glassbox bench llm --local`: seed 001's 200-token run and seed 000's
#     512-in/256-out on the local engine (llama.cpp, SmolLM2-135M Q4_1),
#     written as a measurements CSV;
#  2. a step profile of the engine (decode step at batch 1..SEQS, prompt
#     passes), its capacity from that profile, then the engine under
#     open-loop Poisson load at each fraction of that capacity; the same
#     arrival times and token counts replayed in the simulator with the
#     profiled steps; measured vs simulated P50/P99 TTFT and P99 E2E;
#  3. the simulator against a published vLLM serving figure
#     (`examples/sim_published/`, sources cited there).
#
#   scripts/validate-sim.sh
#   LOADS=0.5 REQUESTS=12 PROMPT=64 GEN=16 scripts/validate-sim.sh   # quick check
#
# Environment: LOADS (fractions of the profiled capacity, default
# "0.3,0.6,0.85"; or RATES in requests/s instead), REQUESTS per rate
# (default 40), PROMPT tokens (default 128), GEN most tokens out (default 32),
# SEQS sequences the engine runs at once (default 4), THREADS (default: all
# cores), OUT (default target/validate-sim). Run it on a quiet machine:
# other work on the cores shows up as queueing the simulator cannot know of.
set -euo pipefail
cd "$(dirname "$0")/.."
LOADS=${LOADS:-0.3,0.6,0.85}
REQUESTS=${REQUESTS:-40}
PROMPT=${PROMPT:-128}
GEN=${GEN:-32}
SEQS=${SEQS:-4}
OUT=${OUT:-target/validate-sim}
mkdir -p "$OUT"

cargo build --release -p glassbox-cli
extra=()
[ -n "${THREADS:-}" ] && extra+=(--threads "$THREADS")
if [ -n "${RATES:-}" ]; then extra+=(--rates "$RATES"); else extra+=(--loads "$LOADS"); fi

echo "== local engine: calibration runs, step profile, then open loop at ${RATES:-$LOADS of capacity}"
target/release/glassbox bench llm --local \
  --requests "$REQUESTS" --prompt-tokens "$PROMPT" --gen-tokens "$GEN" \
  --max-num-seqs "$SEQS" -o "$OUT/bench-llm.csv" "${extra[@]}" | tee "$OUT/local.txt"

echo
echo "== published figure (vLLM, H100, Qwen3-0.6B, 512/128)"
cargo run --release -q -p glassbox-planner --example sim_published | tee "$OUT/published.txt"
echo
echo "results in $OUT/"
