#!/usr/bin/env bash
# Server load benchmark (docs/BENCHMARKS.md, "Server load"): starts
# `glassbox serve` on a temp topologies dir and a temp SQLite store, finds
# its closed-loop capacity with `glassbox bench`, then offers twice that as
# open-loop Poisson arrivals and checks that the server is still alive and
# that every admitted request left a trace.
#
#   scripts/bench-server.sh                     # moderation topology (no model)
#   RAG=1 scripts/bench-server.sh               # also the local-LLM rag-chat example, at low rate
#   SECS=20 PROFILE=dev scripts/bench-server.sh # longer steps, debug build
#
# Environment: SECS (seconds per step, default 10), WARMUP (default 2),
# CONCURRENCIES (closed-loop steps, default "1 2 4 8 16 32"),
# OVERLOAD (multiple of capacity for the open-loop run, default 2),
# PROFILE (release or dev, default release), BIN (a built `glassbox` to use
# instead of building one), RAG (0/1), RAG_RATE (default 0.2),
# RAG_SECS (default 60), SERVE_ARGS (extra `glassbox serve` arguments, e.g. a
# `--config FILE` with a lower concurrency bound or `[store] durability`),
# STORE (trace store URL, default a temp SQLite file), OPEN_LOOP (0: stop
# after the closed-loop steps, default 1).
# Exit 1 if the server died, answered nothing, or a trace is missing.
set -euo pipefail
# SHORT=1: a smoke run that checks the script works, figures meaningless
# (scripts/check-script-order.sh runs it so): the defaults below, each still
# overridable.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

if [[ ${SHORT:-0} == 1 ]]; then
  : "${SECS:=1}" "${WARMUP:=0}" "${CONCURRENCIES:=1 2}" "${OPEN_LOOP:=0}"
fi
secs="${SECS:-10}"
warmup="${WARMUP:-2}"
concurrencies="${CONCURRENCIES:-1 2 4 8 16 32}"
overload="${OVERLOAD:-2}"
profile="${PROFILE:-release}"

bench_bin

tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/topologies"
cp examples/moderation.yaml "$tmp/topologies/"
if [[ "${RAG:-0}" == 1 ]]; then
  cp examples/rag-chat/topology.yaml "$tmp/topologies/rag-chat.yaml"
  # The topology names its knowledge base and index relative to itself.
  cp -r examples/rag-chat/kb examples/rag-chat/kb.index "$tmp/topologies/" 2>/dev/null || true
fi

# Inputs of every length bucket: short questions, the rag-chat questions,
# and long ones, pricing and general alike.
inputs="$tmp/inputs.txt"
{
  echo "What is the price of Pro?"
  echo "hello"
  echo "How much does the cost of the team plan come to per seat?"
  cat examples/rag-chat/questions.txt
  long="I have been comparing several plans for a while and would like to know"
  echo "$long what the price of the Pro plan is once the discount for a yearly commitment applies."
  printf '%s ' "$long" "$long" "$long" "$long" "$long" "$long" "$long" "$long"
  echo "- in short, what does it cost?"
  for _ in $(seq 1 20); do printf '%s ' "$long"; done
  echo "thanks."
} >"$inputs"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
store="${STORE:-sqlite://$tmp/traces.db}"
# shellcheck disable=SC2086 # SERVE_ARGS is a list of words.
"$bin" serve --topologies "$tmp/topologies" --port "$port" \
  --store "$store" ${SERVE_ARGS:-} >"$tmp/serve.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 300); do
  if curl -fsS "$url/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "glassbox serve exited:" >&2
    cat "$tmp/serve.log" >&2
    exit 1
  fi
  sleep 0.2
done
curl -fsS "$url/healthz" >/dev/null

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== binary: $profile, server at $url, store ${store%%://*}, args: ${SERVE_ARGS:-none}"

bench() {
  "$bin" bench --url "$url" --topology "$1" --inputs "$inputs" "${@:2}"
}

# Closed-loop capacity: raise concurrency until the server rejects (its
# concurrency bound is reached) or throughput has not grown by 5% for two
# steps; the capacity is the best throughput seen.
echo "== closed-loop capacity, moderation, ${secs}s per step"
capacity=0
best_c=0
flat=0
printf ' %-11s  %10s  %8s  %8s  %8s  %8s  %6s\n' concurrency "ok req/s" "P50 ms" "P95 ms" "P99 ms" "max ms" "429"
for c in $concurrencies; do
  json="$(bench moderation --concurrency "$c" --duration "$secs" --warmup "$warmup" --format json)"
  read -r rps p50 p95 p99 max rejected < <(jq -r '[.success_rps, .latency_ms.p50, .latency_ms.p95, .latency_ms.p99, .latency_ms.max, .counts.rejected] | map(tostring) | join(" ")' <<<"$json")
  printf ' %-11s  %10.1f  %8.2f  %8.2f  %8.2f  %8.2f  %6s\n' "$c" "$rps" "$p50" "$p95" "$p99" "$max" "$rejected"
  if [[ "$(jq -n --argjson r "$rps" --argjson cap "$capacity" '$r > $cap * 1.05')" == true ]]; then
    flat=0
  else
    flat=$((flat + 1))
  fi
  if [[ "$(jq -n --argjson r "$rps" --argjson cap "$capacity" '$r > $cap')" == true ]]; then
    capacity="$rps"
    best_c="$c"
  fi
  if [[ "$flat" -ge 2 || "$rejected" != 0 ]]; then break; fi
done
capacity="$(jq -n --argjson cap "$capacity" '($cap * 10 | floor) / 10')"
echo "capacity: $capacity req/s (closed loop, concurrency $best_c)"
# The trace writer's counters: requests written (vs answered) and queue depth
# show whether it kept up; requests ÷ commits is the group-commit size.
curl -fsS "$url/metrics" | grep -E '^glassbox_trace_(requests_written|commits|commit_seconds|queue_depth) ' |
  awk '{printf "%s %s  ", $1, $2} END {print ""}'
if [[ "${OPEN_LOOP:-1}" == 0 ]]; then
  exit 0
fi

rate="$(jq -n --argjson cap "$capacity" --argjson k "$overload" '($cap * $k * 10 | floor) / 10')"
echo
echo "== open loop at ${overload}x capacity: $rate req/s Poisson, $((secs * 3))s, every admitted request's trace checked"
status=0
bench moderation --rate "$rate" --duration "$((secs * 3))" --warmup "$warmup" \
  --timeout 10s --verify-traces || status=$?

if [[ "${RAG:-0}" == 1 ]]; then
  echo
  echo "== rag-chat (local SmolLM2 + MiniLM), open loop at ${RAG_RATE:-0.2} req/s"
  bench rag-chat --rate "${RAG_RATE:-0.2}" --duration "${RAG_SECS:-60}" --timeout 120s \
    --verify-traces || status=$?
fi

echo
if kill -0 "$server_pid" 2>/dev/null && curl -fsS "$url/healthz" >/dev/null; then
  echo "server: alive and answering /healthz after the overload"
else
  echo "server: DEAD after the overload; its log:" >&2
  tail -50 "$tmp/serve.log" >&2
  status=1
fi
if [[ "$status" != 0 ]]; then
  echo "FAILED (glassbox bench exit $status: server unreachable or traces missing)" >&2
fi
exit "$status"
