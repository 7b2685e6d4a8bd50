#!/usr/bin/env bash
# Failover under load (docs/BENCHMARKS.md, "Failover under load"; issue #32
# item 7): goodput and P99 latency per second across a worker's SIGKILL,
# for the current build and, when BEFORE names one, an older binary. One
# command, one run per binary:
#
#  1. a temporary 1-member etcd; two `glassbox worker`s, each serving the RAG
#     example's two models (SmolLM2-135M and MiniLM, THREADS thread(s) each);
#     a coordinator (`glassbox serve --cluster`, default settings) serving
#     examples/rag-chat unchanged (its index built by the same binary);
#  2. capacity, once, with the current build (or CAPACITY): CLIENTS
#     closed-loop clients with no pause for CAP_SECONDS, completed runs/s;
#  3. the run: CLIENTS closed-loop clients sending the example's questions,
#     paced to LOAD % of that capacity, for DURATION s; at KILL_AT s worker
#     w1 gets SIGKILL while it decodes; every request's start, end and status
#     are kept (scripts/bench_failover.py);
#  4. the chart: goodput (HTTP 200 answers per second) and their P99 latency
#     in 1 s buckets over time, one line per binary, as an SVG (CHART), and a
#     table of failures, goodput and P99 before and after the kill.
#
#   scripts/bench-failover.sh
#   BEFORE=../old/target/release/glassbox scripts/bench-failover.sh   # before / after
#   SHORT=1 scripts/bench-failover.sh                                 # smoke run
#   BEFORE=... COMPARE=3 scripts/bench-failover.sh   # capacity only: before / after, 3 rounds
#
# COMPARE=N measures no failover: the capacity (step 2) of BEFORE and of the
# current build on fresh pools, alternating, N rounds, one table (runs/s and
# latency P50 / P95 / P99), for a change to the workers' or the coordinator's
# serving path.
#
# Environment: BEFORE (an older `glassbox` to compare), BIN (the current
# build; else PROFILE, default release, is built), CLIENTS (default 4), LOAD
# (% of capacity, default 70), DURATION (s, default 60), KILL_AT (s, default
# 20), CAP_SECONDS (default 20), THREADS (per model, default 1), MAX_TOKENS
# (default: the example's), SLOWDOWN (the workers' test throttle, default 1),
# LEASE_TTL (s, default the worker's), CAPACITY (runs/s: skip step 2), QUESTIONS
# (one per line, cycled; default the example's questions.txt), OUT
# (default target-models/bench), CHART (default OUT/failover-STAMP.svg).
# Writes OUT/failover-STAMP-LABEL.jsonl per run.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

# SHORT=1: a smoke run that checks the script works, figures meaningless
# (scripts/check-script-order.sh runs it so).
if [[ ${SHORT:-0} == 1 ]]; then
  : "${CLIENTS:=2}" "${DURATION:=16}" "${KILL_AT:=6}" "${CAP_SECONDS:=8}" "${MAX_TOKENS:=8}"
fi
clients="${CLIENTS:-4}"
load="${LOAD:-70}"
duration="${DURATION:-60}"
kill_at="${KILL_AT:-20}"
cap_seconds="${CAP_SECONDS:-20}"
threads="${THREADS:-1}"
slowdown="${SLOWDOWN:-1}"
profile="${PROFILE:-release}"
out="${OUT:-target-models/bench}"
models_dir="${GLASSBOX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/glassbox/models}"
llm="$models_dir/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
embedding="$models_dir/all-minilm-l6-v2"
example=examples/rag-chat

die() {
  echo "bench-failover: $*" >&2
  exit 2
}

[[ -f "$llm" && -d "$embedding" ]] || die "no models in $models_dir (scripts/fetch-models.sh fetches them)"
command -v etcd >/dev/null || ./scripts/install-deps.sh >&2
command -v etcd >/dev/null || die "no etcd on PATH (scripts/install-deps.sh installs etcd-server)"
command -v jq >/dev/null || die "jq is needed"
if [[ -n "${BEFORE:-}" ]]; then
  [[ -x "$BEFORE" ]] || die "BEFORE=$BEFORE is not an executable"
  before="$(realpath "$BEFORE")"
fi

bench_bin

tmp="$(mktemp -d)"
pids=()
stop() { # stop PID: ends one process this script started
  if kill -0 "$1" 2>/dev/null; then
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  for pid in "${pids[@]}"; do stop "$pid"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$out"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
chart="${CHART:-$out/failover-$stamp.svg}"
started=$SECONDS

echo "== machine: $(machine_line)"
echo "== glassbox: $("$bin" --version 2>/dev/null | head -1) ($profile), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "${before:-}" ]] && echo "== before: $before ($("$before" --version 2>/dev/null | head -1))"
echo "== pool: 2 workers x (smollm2-135m + all-minilm-l6-v2), $threads thread(s), test slowdown $slowdown; $clients clients at $load % of capacity; kill at $kill_at s of $duration s"

# pool_up BIN LABEL: etcd, two workers and a coordinator, all from BIN;
# sets `curl_url`, `w1_pid`, `w1_url`, `up` (their pids).
pool_up() {
  local b="$1" label="$2" dir="$tmp/$2"
  mkdir -p "$dir/topologies"
  up=()
  local eport pport etcd_url
  eport="$(free_port)"
  pport="$(free_port)"
  etcd_url="http://127.0.0.1:$eport"
  etcd --name bench --data-dir "$dir/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "bench=http://127.0.0.1:$pport" --log-level warn \
    >"$dir/etcd.log" 2>&1 &
  pids+=($!) && up+=($!)
  wait_for "$etcd_url/health" "$!" "$dir/etcd.log" etcd

  local topology="$dir/topologies/rag-chat.yaml"
  cp "$example/topology.yaml" "$topology"
  if [[ -n "${MAX_TOKENS:-}" ]]; then
    sed -i -E "s/max_tokens: [0-9]+/max_tokens: $MAX_TOKENS/" "$topology"
  fi
  "$b" index build "$example/kb" --out "$dir/topologies/kb.index" >"$dir/index.log" 2>&1 ||
    { tail -20 "$dir/index.log" >&2; die "$label: index build failed"; }

  local extra=()
  [[ "$slowdown" != 1 ]] && extra+=(--test-slowdown "$slowdown")
  [[ -n "${LEASE_TTL:-}" ]] && extra+=(--lease-ttl "$LEASE_TTL")
  for id in w1 w2; do
    local port
    port="$(free_port)"
    "$b" worker --etcd "$etcd_url" --id "$id" --host 127.0.0.1 --port "$port" \
      --llm "smollm2-135m=$llm" --embedding "all-minilm-l6-v2=$embedding" \
      --threads "$threads" "${extra[@]}" \
      >"$dir/$id.log" 2>&1 &
    pids+=($!) && up+=($!)
    wait_for "http://127.0.0.1:$port/healthz" "$!" "$dir/$id.log" "$label worker $id"
    if [[ $id == w1 ]]; then
      w1_pid=$!
      w1_url="http://127.0.0.1:$port"
    fi
  done

  local cport
  cport="$(free_port)"
  curl_url="http://127.0.0.1:$cport"
  "$b" serve --topologies "$dir/topologies" --cluster "$etcd_url" --port "$cport" \
    --store "sqlite://$dir/coordinator.db" >"$dir/coordinator.log" 2>&1 &
  pids+=($!) && up+=($!)
  wait_for "$curl_url/healthz" "$!" "$dir/coordinator.log" "$label coordinator"
  local n=0
  for _ in $(seq 1 150); do
    n="$(curl -fsS "$curl_url/v1/cluster/workers" | jq '[.workers[] | select(.load != null)] | length' 2>/dev/null || echo 0)"
    [[ "$n" == 2 ]] && break
    sleep 0.2
  done
  [[ "$n" == 2 ]] || die "$label: the coordinator sees $n of 2 workers with a load"
}

pool_down() {
  local pid
  for pid in "${up[@]}"; do stop "$pid"; done
}

drive() { # drive COMMAND ARGS...: the load client against the pool up now
  python3 scripts/bench_failover.py "$1" --url "$curl_url" \
    --questions "${QUESTIONS:-$example/questions.txt}" --clients "$clients" "${@:2}"
}

# --- before / after capacity only (COMPARE=N) ------------------------------
if [[ -n "${COMPARE:-}" ]]; then
  [[ -n "${before:-}" ]] || die "COMPARE needs BEFORE (an older glassbox)"
  echo
  echo "| round | binary | runs/s | latency P50 / P95 / P99 s | failed | requests |"
  echo "|---:|---|---:|---:|---:|---:|"
  for round in $(seq 1 "$COMPARE"); do
    for spec in "before=$before" "after=$bin"; do
      label="${spec%%=*}"
      pool_up "${spec#*=}" "$label-$round"
      cap="$(drive capacity --seconds "$cap_seconds" --warmup "$((cap_seconds / 4 + 1))")"
      pool_down
      echo "| $round | $label | $(jq -r '"\(.rps * 1000 | round / 1000) | \(.p50_s) / \(.p95_s) / \(.p99_s) | \(.failed) | \(.requests)"' <<<"$cap")"
    done
  done
  exit 0
fi

# --- capacity -------------------------------------------------------------
if [[ -n "${CAPACITY:-}" ]]; then
  capacity="$CAPACITY"
  echo "== capacity: $capacity runs/s (given)"
else
  pool_up "$bin" capacity
  cap="$(drive capacity --seconds "$cap_seconds" --warmup "$((cap_seconds / 4 + 1))")"
  pool_down
  capacity="$(jq '.rps' <<<"$cap")"
  [[ "$(jq '.failed' <<<"$cap")" == 0 ]] || echo "   (the capacity run had $(jq '.failed' <<<"$cap") failed requests)"
  echo "== capacity: $(printf %.2f "$capacity") runs/s ($clients closed-loop clients, no pause, both workers)"
fi
rate="$(jq -n "$capacity * $load / 100")"
jq -e -n "$rate > 0" >/dev/null || die "capacity measured 0 runs/s: nothing to pace"
echo "== offered: $(printf %.2f "$rate") runs/s ($load %)"

# --- runs -----------------------------------------------------------------
runs=()
[[ -n "${before:-}" ]] && runs+=("before=$before")
runs+=("after=$bin")
charted=()
for spec in "${runs[@]}"; do
  label="${spec%%=*}"
  b="${spec#*=}"
  pool_up "$b" "$label"
  file="$out/failover-$stamp-$label.jsonl"
  echo "-- $label: $(drive run --rate "$rate" --seconds "$duration" --kill-at "$kill_at" \
    --kill-pid "$w1_pid" --kill-metrics "$w1_url" --out "$file")"
  pool_down
  charted+=(--run "$label=$file")
done

echo
python3 scripts/bench_failover.py chart "${charted[@]}" --svg "$chart" --settle 20
echo
echo "== chart: $chart; runs: $out/failover-$stamp-*.jsonl ($((SECONDS - started)) s)"
