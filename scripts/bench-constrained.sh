#!/usr/bin/env bash
# Constrained decoding on the local model (SmolLM2-135M): invalid JSON per
# 1,000 generations with and without a grammar built from the JSON Schema,
# and what constraining costs per output token; prints a Markdown table.
#
#   tasks        a tool call among six tools (the agent example's two and
#                four more, two with nested arguments), and a
#                `response_format: json_schema` answer (nested object, list)
#   valid / not JSON / off schema / cut off
#                each generation is exactly one of these; "cut off" stopped
#                at max_tokens before it parsed and is not counted invalid
#   invalid/1k   (not JSON + off schema) per 1,000, with a 95% Wilson interval
#   speed        BENCH_SPEED_N generations per arm run to their end: time per
#                output token P50/P95/P99 and output tok/s, BENCH_SEQS at once
#
#   BENCH_N        generations per task and arm (default 1000)
#   BENCH_SEQS     sequences generated at once, one batch (default 16)
#   BENCH_MAX_TOKENS  max_tokens per generation (default 256)
#   BENCH_SPEED_N  generations per arm for the speed rows (default 32)
#   BENCH_ARM_S    seconds an arm may start generations (default 3600); the
#                  ones in flight then finish and the table gives the n run
#   BENCH_SPEED_S  the same for the speed rows (default 3600)
#   BENCH_THREADS  llama.cpp threads (default 2)
#   PROFILE        cargo profile (default release)
#   BENCH_TASKS    `tool`, `nested` or `tool,nested` (default both)
#   BENCH_GRAMMAR  the arms: `no`, `yes` or `no,yes` (default both)
#   SHORT=1        a smoke run (8 generations per arm, 4 for speed)
#
# The same prompts go to both arms (the tools or the schema described in
# the system prompt, as `llm_inference` writes it; a short support
# question; each generation its own seed, temperature 0.6, 0.8 or 1.0);
# only the grammar differs. Unguided generations stop as soon as their
# text can no longer become JSON (see crates/nodes/examples/bench_constrained.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
short=${SHORT:-0}
if [[ $short == 1 ]]; then
  n=${BENCH_N:-8}
  speed_n=${BENCH_SPEED_N:-4}
else
  n=${BENCH_N:-1000}
  speed_n=${BENCH_SPEED_N:-32}
fi
seqs=${BENCH_SEQS:-16}
max_tokens=${BENCH_MAX_TOKENS:-256}
arm_s=${BENCH_ARM_S:-3600}
speed_s=${BENCH_SPEED_S:-3600}
threads=${BENCH_THREADS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
source scripts/bench-lib.sh
profile=${PROFILE:-release}

./scripts/install-deps.sh >&2
if [[ $profile == release ]]; then ./scripts/fetch-models.sh --release >&2; else ./scripts/fetch-models.sh >&2; fi
echo "building the $profile example ..." >&2
# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build --locked $(profile_args) -p glassbox-nodes --example bench_constrained --quiet
bin=$(profile_dir)/examples/bench_constrained

echo "running $n generations per task and arm, $seqs at once ..." >&2
start=$(date +%s)
# The example sits one folder below the llama.cpp libraries it links.
json=$(LD_LIBRARY_PATH="$(profile_dir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" \
  --n "$n" --seqs "$seqs" --max-tokens "$max_tokens" --speed-n "$speed_n" \
  --arm-s "$arm_s" --speed-s "$speed_s" --threads "$threads" \
  --tasks "${BENCH_TASKS:-tool,nested}" --grammar "${BENCH_GRAMMAR:-no,yes}")
python3 - "$json" "$n" "$seqs" "$max_tokens" "$(($(date +%s) - start))" <<'PY'
import json, math, sys
rows = json.loads(sys.argv[1])
n, seqs, max_tokens, took = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def wilson(k, n, z=1.96):
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h) * 1000, min(1.0, c + h) * 1000)

print(f"Constrained decoding, SmolLM2-135M Q4_1: up to {n} generations per task and arm, {seqs} at once, "
      f"max_tokens {max_tokens}, temperatures 0.6/0.8/1.0, a seed each; {took} s in all\n")
print("| task | grammar | n | valid | not JSON | off schema | cut off | invalid / 1,000 (95% CI) | took s |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
for r in rows:
    bad = r["not_json"] + r["off_schema"]
    lo, hi = wilson(bad, r["n"])
    per_k = bad * 1000 / max(1, r["n"])
    print(f"| {r['task']} | {'yes' if r['grammar'] else 'no'} | {r['n']} | {r['valid']} | {r['not_json']} "
          f"| {r['off_schema']} | {r['cut_off']} | {per_k:.0f} ({lo:.0f}–{hi:.0f}) | {r['wall_s']:.0f} |")
print("\nSpeed, generations run to their end (no early stop):\n")
print("| task | grammar | n | out tokens / gen | TPOT P50 / P95 / P99 ms | out tok/s |")
print("|---|---|--:|--:|--:|--:|")
for r in rows:
    print(f"| {r['task']} | {'yes' if r['grammar'] else 'no'} | {r['speed_n']} | {r['speed_mean_tokens']:.0f} "
          f"| {r['tpot_p50_ms']:.1f} / {r['tpot_p95_ms']:.1f} / {r['tpot_p99_ms']:.1f} | {r['tokens_per_s']:.1f} |")
PY
