#!/usr/bin/env bash
# Trace-store benchmarks (docs/BENCHMARKS.md, "Trace store"): spans ingested
# per second into SQLite and PostgreSQL through the real writer; `glassbox
# report` P95-by-day over 1,000,000 stored requests; engine throughput with
# the SQLite store on vs off.
#
#   scripts/bench-store.sh                 # everything
#   REQUESTS=200000 ENGINE_SECS=10 scripts/bench-store.sh
set -euo pipefail
cd "$(dirname "$0")/.."

requests="${REQUESTS:-200000}"
report_requests="${REPORT_REQUESTS:-1000000}"
engine_secs="${ENGINE_SECS:-10}"
out=target/bench-store
mkdir -p "$out"

./scripts/install-postgres.sh >&2

cargo build -q --release -p glassbox-store --example store_bench --example engine_store_bench
bin=target/release/examples

echo "== ingest (SQLite): requests in start-time order (a live stream), 3 runs" >&2
for _ in 1 2 3; do sync; "$bin/store_bench" ingest sqlite "$requests" 1; done
echo "== ingest (SQLite): requests interleaved over 7 days (a backfill), 3 runs" >&2
for _ in 1 2 3; do sync; "$bin/store_bench" ingest sqlite "$requests" 7; done
echo "== ingest (PostgreSQL, throwaway server, fsync on)" >&2
"$bin/store_bench" ingest postgres "$requests"

db="$out/report-1m.db"
if [[ ! -s "$db" ]]; then
  echo "== seeding $report_requests requests into $db" >&2
  "$bin/store_bench" seed "sqlite://$PWD/$db" "$report_requests" 30
fi
echo "== report over $report_requests requests" >&2
"$bin/store_bench" report "sqlite://$PWD/$db"

echo "== engine with the SQLite store on vs off" >&2
"$bin/engine_store_bench" "$engine_secs"
