#!/usr/bin/env bash
# OTLP ingest throughput (docs/BENCHMARKS.md, "OTLP ingest"): spans per second
# that `glassbox serve` takes over OTLP/HTTP protobuf (`POST /v1/traces`) into
# a SQLite store, each export answered only after its traces committed
# (`durability = "commit"`, the default), side by side with the native
# ingest figure (the same writer fed in-process by `store_bench ingest`).
#
#   scripts/bench-otlp.sh                        # 300,000 spans, exports of 1,020 spans, 4 clients
#   SPANS=600000 CLIENTS=8 scripts/bench-otlp.sh
#   SHORT=1 PROFILE=dev scripts/bench-otlp.sh    # smoke run: figures meaningless
#
# PROFILE: cargo profile (default release); BIN: a glassbox binary to
# measure instead of building one. RUNS (default 3): runs of each side.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

if [[ ${SHORT:-0} == 1 ]]; then
  : "${SPANS:=12000}" "${RUNS:=1}"
fi
spans="${SPANS:-300000}"
per_export="${PER_EXPORT:-1020}"
clients="${CLIENTS:-4}"
runs="${RUNS:-3}"
profile="${PROFILE:-release}"

build_profile="$profile"
bench_bin   # with BIN, sets `profile` to the binary's path
shown_profile="$profile"
profile="$build_profile"
# shellcheck disable=SC2046 # profile_args is a list of words.
cargo build -q --locked $(profile_args) -p glassbox-ingest --example otlp_load
# shellcheck disable=SC2046
cargo build -q --locked $(profile_args) -p glassbox-store --example store_bench
examples="$(profile_dir)/examples"

tmp="$(mktemp -d)"
server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/topologies"

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== binary: $shown_profile, examples: $profile; $spans spans per run in exports of $per_export, $clients clients, $runs runs"

# load_avg: the 1-minute load average (the machine may be shared).
load_avg() { cut -d' ' -f1 /proc/loadavg; }
# cpu_ticks PID: user + system CPU time of a process so far, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

otlp=()
for run in $(seq 1 "$runs"); do
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  url="http://127.0.0.1:$port"
  rm -rf "$tmp"/traces.db*
  "$bin" serve --topologies "$tmp/topologies" --port "$port" \
    --store "sqlite://$tmp/traces.db" >"$tmp/serve.log" 2>&1 &
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
  sync
  load_before="$(load_avg)"
  cpu_before="$(cpu_ticks "$server_pid")"
  json="$("$examples/otlp_load" "$url" "$spans" "$per_export" "$clients")"
  server_cpu="$(python3 -c "print(($(cpu_ticks "$server_pid") - $cpu_before) / $(getconf CLK_TCK))")"
  json="$(python3 -c 'import json, sys; o = json.loads(sys.argv[1]); o.update(server_cpu_s=float(sys.argv[2]), load=sys.argv[3] + " -> " + sys.argv[4]); print(json.dumps(o))' \
    "$json" "$server_cpu" "$load_before" "$(load_avg)")"
  echo "   otlp run $run: $json" >&2
  stop_server
  otlp+=("$json")
  # Every acknowledged span is in the store.
  python3 - "$tmp/traces.db" "$json" <<'PY'
import json, sqlite3, sys
want = json.loads(sys.argv[2])["spans"]
got = sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM spans").fetchone()[0]
if got != want:
    sys.exit(f"error: the server acknowledged {want} spans but the store holds {got}")
PY
done

native=()
requests=$((spans / 6))
for run in $(seq 1 "$runs"); do
  sync
  load_before="$(load_avg)"
  line="$("$examples/store_bench" ingest sqlite "$requests" 1)"
  echo "   native run $run (load $load_before -> $(load_avg)): $line" >&2
  native+=("$(echo "$line" | sed -E 's/.* = ([0-9]+) spans\/s.*= ([0-9.]+) cpu-ms per 1000 spans.*/\1:\2/')")
done

python3 - "$spans" "${otlp[@]}" -- "${native[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[2:]
cut = args.index("--")
otlp = [json.loads(a) for a in args[:cut]]
native = [tuple(float(x) for x in a.split(":")) for a in args[cut + 1:]]
def med(xs): return statistics.median(xs)
def per_k(o, key): return o[key] * 1e6 / o["spans"]
print()
print(f"{'path':<66} {'median spans/s':>14} {'CPU ms/1k spans':>16}  runs (spans/s)")
print(f"{'OTLP/HTTP protobuf -> glassbox serve -> SQLite, ack after commit':<66} {med([o['spans_per_s'] for o in otlp]):>14,.0f} {med([per_k(o, 'server_cpu_s') for o in otlp]):>16.1f}  " + ", ".join(f"{o['spans_per_s']:,.0f}" for o in otlp))
print(f"{'native: StoreWriter in-process -> SQLite (store_bench ingest)':<66} {med([n[0] for n in native]):>14,.0f} {med([n[1] for n in native]):>16.1f}  " + ", ".join(f"{n[0]:,.0f}" for n in native))
print()
print("CPU ms/1k spans: CPU time (user + system, every thread) per 1,000 spans, of the server")
print(f"process (OTLP) or of store_bench (native); the OTLP client took another {med([per_k(o, 'cpu_s') for o in otlp]):.1f}.")
print()
print(f"{'export latency (send to committed ack)':<40} {'P50 ms':>8} {'P95 ms':>8} {'P99 ms':>8} {'max ms':>8}  load (1 min)")
for i, o in enumerate(otlp, 1):
    print(f"{'run ' + str(i) + ' (' + str(o['spans_per_export']) + ' spans/export, ' + str(o['clients']) + ' clients)':<40} {o['p50_ms']:>8.1f} {o['p95_ms']:>8.1f} {o['p99_ms']:>8.1f} {o['max_ms']:>8.1f}  {o['load']}")
print(f"\nwire size: {otlp[0]['bytes_per_span']} bytes/span (protobuf)")
PY
