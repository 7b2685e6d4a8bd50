#!/usr/bin/env bash
# Validates the serving simulator (docs/planner.md, "Validation of the
# simulator"; issue #17 item 2). One command:
#
#  1. `glassbox bench llm --local`: seed 001's 200-token run and seed 000's
#     512-in/256-out on the local engine (llama.cpp, SmolLM2-135M Q4_1),
#     written as a measurements CSV;
#  2. the local engine under open-loop Poisson load at each rate; the same
#     arrival times and token counts replayed in the simulator with factors
#     fitted from step 1; measured vs simulated P50/P99 TTFT and P99 E2E;
#  3. the simulator against a published vLLM serving figure
#     (`examples/sim_published.rs`, source cited there).
#
#   scripts/validate-sim.sh
#   RATES=0.5,1 REQUESTS=12 PROMPT=64 GEN=16 scripts/validate-sim.sh   # quick check
#
# Environment: RATES (requests/s, default "0.25,0.5,1,2"), REQUESTS per rate
# (default 60), PROMPT tokens (default 256), GEN most tokens out (default 64),
# SEQS sequences the engine runs at once (default 4), THREADS (default: all
# cores), HARDWARE_FILE (a catalogue entry describing this machine; default
# cpu-generic), OUT (default target/validate-sim). Run it on a quiet machine:
# other work on the cores shows up as queueing the simulator cannot know of.
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-0.25,0.5,1,2}
REQUESTS=${REQUESTS:-60}
PROMPT=${PROMPT:-256}
GEN=${GEN:-64}
SEQS=${SEQS:-4}
OUT=${OUT:-target/validate-sim}
mkdir -p "$OUT"

cargo build --release -p glassbox-cli
extra=()
[ -n "${THREADS:-}" ] && extra+=(--threads "$THREADS")
[ -n "${HARDWARE_FILE:-}" ] && extra+=(--hardware-file "$HARDWARE_FILE")

echo "== local engine: calibration runs, then open loop at $RATES req/s"
target/release/glassbox bench llm --local \
  --rates "$RATES" --requests "$REQUESTS" --prompt-tokens "$PROMPT" --gen-tokens "$GEN" \
  --max-num-seqs "$SEQS" -o "$OUT/bench-llm.csv" "${extra[@]}" | tee "$OUT/local.txt"

echo
echo "== published figure (vLLM, H100, Qwen3-0.6B, 512/128)"
cargo run --release -q -p glassbox-planner --example sim_published | tee "$OUT/published.txt"
echo
echo "results in $OUT/"
