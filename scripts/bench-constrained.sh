#!/usr/bin/env bash
# Constrained decoding on the local model (SmolLM2-135M): invalid JSON per
# 1,000 generations with and without a grammar built from the JSON Schema,
# and what constraining costs per output token; prints a Markdown table.
#
#   task         a tool call among three tools (nested arguments), and a
#                `response_format: json_schema` answer (nested object, list)
#   invalid/1k   answers that are not JSON, or JSON off the schema, per 1,000
#   cost         time per output token P50/P95/P99, output tok/s at 8 seqs
#
#   BENCH_N        generations per task and arm (default 250; reported per 1,000)
#   BENCH_THREADS  llama.cpp threads (default 2)
#   PROFILE        cargo profile (default release)
#   SHORT=1        a smoke run (8 generations per arm); its figures mean little
#
# The same prompt goes to both arms (the tools or the schema described in
# the system prompt, as `llm_inference` writes it); only the grammar differs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
short=${SHORT:-0}
if [[ $short == 1 ]]; then n=${BENCH_N:-8}; else n=${BENCH_N:-250}; fi
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

echo "running $n generations per task and arm ..." >&2
# The example sits one folder below the llama.cpp libraries it links.
json=$(LD_LIBRARY_PATH="$(profile_dir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" --n "$n" --threads "$threads")
python3 - "$json" "$n" <<'PY'
import json, sys
rows = json.loads(sys.argv[1])
print(f"Constrained decoding, SmolLM2-135M Q4_1, {sys.argv[2]} generations per task and arm, temperature 0.7\n")
print("| task | grammar | n | not JSON | off schema | cut off | invalid / 1,000 | TPOT P50 / P95 / P99 ms | out tok/s |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
for r in rows:
    print(f"| {r['task']} | {'yes' if r['grammar'] else 'no'} | {r['n']} | {r['not_json']} | {r['off_schema']} | {r['cut_off']} "
          f"| {r['invalid_per_1000']:.0f} | {r['tpot_p50_ms']:.2f} / {r['tpot_p95_ms']:.2f} / {r['tpot_p99_ms']:.2f} | {r['tokens_per_s']:.0f} |")
PY
