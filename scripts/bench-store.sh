#!/usr/bin/env bash
# Trace-store benchmarks (docs/BENCHMARKS.md, "Trace store"): spans ingested
# per second into SQLite and PostgreSQL through the real writer; `glassbox
# report` P95-by-day over 1,000,000 stored requests; engine throughput with
# the SQLite store on vs off.
#
#   scripts/bench-store.sh                 # everything
#   REQUESTS=200000 ENGINE_SECS=10 scripts/bench-store.sh
#   SHORT=1 PROFILE=dev scripts/bench-store.sh   # smoke run: a few thousand requests
#
# PROFILE: cargo profile (default release). SHORT=1: a smoke run that checks
# the script works (scripts/check-script-order.sh), its figures meaningless.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh

if [[ ${SHORT:-0} == 1 ]]; then
  requests="${REQUESTS:-2000}"
  report_requests="${REPORT_REQUESTS:-5000}"
  engine_secs="${ENGINE_SECS:-1}"
else
  requests="${REQUESTS:-200000}"
  report_requests="${REPORT_REQUESTS:-1000000}"
  engine_secs="${ENGINE_SECS:-10}"
fi
profile="${PROFILE:-release}"
out="${CARGO_TARGET_DIR:-target}/bench-store"
mkdir -p "$out"

./scripts/install-postgres.sh >&2

# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build -q --locked $(profile_args) -p glassbox-store --example store_bench --example engine_store_bench
bin="$(profile_dir)/examples"

echo "== ingest (SQLite): requests in start-time order (a live stream), 3 runs" >&2
for _ in 1 2 3; do sync; "$bin/store_bench" ingest sqlite "$requests" 1; done
echo "== ingest (SQLite): requests interleaved over 7 days (a backfill), 3 runs" >&2
for _ in 1 2 3; do sync; "$bin/store_bench" ingest sqlite "$requests" 7; done
echo "== ingest (PostgreSQL, throwaway server, fsync on)" >&2
"$bin/store_bench" ingest postgres "$requests"

db="$out/report-$report_requests.db"
if [[ ! -s "$db" ]]; then
  echo "== seeding $report_requests requests into $db" >&2
  "$bin/store_bench" seed "sqlite://$(realpath "$db")" "$report_requests" 30
fi
echo "== report over $report_requests requests" >&2
"$bin/store_bench" report "sqlite://$(realpath "$db")"

echo "== engine with the SQLite store on vs off" >&2
"$bin/engine_store_bench" "$engine_secs"
