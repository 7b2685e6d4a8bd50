#!/usr/bin/env bash
# Serving benchmark against llama.cpp's llama-server (docs/BENCHMARKS.md,
# "Serving: glassbox vs llama-server"; issue #15). One command, one run:
#
#  1. side by side: `llama-server` and `glassbox serve` (a topology of one
#     `llm_inference` node) on the same GGUF file, threads and context per
#     sequence, 16 sequences each, driven by the same streaming client
#     (scripts/bench_serving.py) at 1 / 4 / 8 / 16 concurrent streams:
#     aggregate output tok/s, TTFT and TPOT P50/P99 per server;
#  2. `rag-chat` end to end through `glassbox serve` at 1 / 4 / 8 closed-loop
#     clients (`glassbox bench --verify-traces`): req/s, P50/P99, errors,
#     timeouts, and every request's trace looked up.
#
#   scripts/bench-serving.sh
#   REQUESTS=8 CONCURRENCIES="1 4" RAG=0 LLAMA_SERVER=... scripts/bench-serving.sh   # quick check
#
# The peer: LLAMA_SERVER (a binary) or LLAMA_CPP_SRC (a llama.cpp checkout
# whose build*/bin holds one); with neither, scripts/build-llama-server.sh
# builds it once (llama.cpp from PyPI's llama-cpp-python source package, with
# glassbox's ggml settings) and runs it on the measured glassbox's own
# libllama and ggml (docs/BENCHMARKS.md says why).
#
# Environment: LLAMA_SERVER, LLAMA_CPP_SRC, LLAMA_ARGS (extra llama-server
# arguments), MODEL (GGUF file, default SmolLM2-135M-Instruct Q4_1 from the
# models directory), THREADS (default: one per physical core, 2 on
# the 2-core VM of docs/BENCHMARKS.md), CTX (context per sequence, default
# 2048), SEQS (sequences per server, default 16), CONCURRENCIES (default
# "1 4 8 16"), REQUESTS (per server and level, default 32), MAX_TOKENS
# (default 128), PROMPTS (one per line, default
# examples/rag-chat/questions.txt), SYSTEM (system message), WARMUP (unmeasured
# requests per server one at a time before a pass at the widest level, default
# 2), LEVEL_WARMUP (unmeasured rounds of C requests per server right before each
# level, default 1), PROFILE (release or dev), BIN (a built
# `glassbox` instead of building one), RAG (0: skip part 2), RAG_CLIENTS
# (default "1 4 8"), RAG_REQUESTS (per client, default 3), RAG_MAX_NUM_SEQS
# (set `max_num_seqs` on rag-chat's llm node; default: as in the example), SIDE
# (0: skip part 1, no llama-server needed),
# OUT (results directory, default target-models/bench).
# Writes OUT/serving-STAMP.json (and OUT/rag-chat-STAMP.json). Exit 1 on any
# failed or timed-out request, a missing trace, or a missed target
# (glassbox tok/s ≥ 1.0× llama-server's and TTFT P99 no worse, every level).
set -euo pipefail
# SHORT=1: a smoke run that checks the script works, figures meaningless
# (scripts/check-script-order.sh runs it so): the defaults below, each still
# overridable.
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

if [[ ${SHORT:-0} == 1 ]]; then
  # No llama-server peer: building it is minutes of C++ (scripts/build-llama-server.sh).
  : "${SIDE:=0}" "${RAG_CLIENTS:=1}" "${RAG_REQUESTS:=1}"
fi
threads="${THREADS:-$(physical_cores)}"
ctx="${CTX:-2048}"
seqs="${SEQS:-16}"
concurrencies="${CONCURRENCIES:-1 4 8 16}"
requests="${REQUESTS:-32}"
max_tokens="${MAX_TOKENS:-128}"
prompts="${PROMPTS:-examples/rag-chat/questions.txt}"
system="${SYSTEM:-You are a helpful assistant. Answer the question in detail.}"
warmup="${WARMUP:-2}"
level_warmup="${LEVEL_WARMUP:-1}"
profile="${PROFILE:-release}"
out="${OUT:-target-models/bench}"
models_dir="${GLASSBOX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/glassbox/models}"
model="${MODEL:-$models_dir/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"

die() {
  echo "bench-serving: $*" >&2
  exit 2
}

# --- the peer -------------------------------------------------------------
llama="${LLAMA_SERVER:-}"
if [[ -z "$llama" && -n "${LLAMA_CPP_SRC:-}" ]]; then
  for candidate in "$LLAMA_CPP_SRC"/build*/bin/llama-server; do
    if [[ -x "$candidate" ]]; then
      llama="$candidate"
      break
    fi
  done
fi
[[ -f "$model" ]] || die "no model at $model (scripts/fetch-models.sh fetches it, or set MODEL)"
[[ -f "$prompts" ]] || die "no prompts file $prompts"
command -v jq >/dev/null || die "jq is needed"

# --- glassbox -------------------------------------------------------------
bench_bin

if [[ "${SIDE:-1}" == 1 && -z "$llama" ]]; then
  # Neither given: build the peer once and run it on this glassbox's
  # libllama and ggml, the llama.cpp commit llama-cpp-sys-2 vendors
  # (scripts/build-llama-server.sh).
  llama="$(scripts/build-llama-server.sh --libs "$(dirname "$bin")" | tail -1)"
fi
if [[ "${SIDE:-1}" == 1 && ! -x "$llama" ]]; then
  die "no llama-server binary at '$llama' (LLAMA_SERVER='${LLAMA_SERVER:-}', LLAMA_CPP_SRC='${LLAMA_CPP_SRC:-}').
  Leave both unset and scripts/build-llama-server.sh builds one, or point
  LLAMA_SERVER at a binary (LLAMA_CPP_SRC at a checkout whose build*/bin holds one)."
fi
if [[ -n "$llama" ]]; then llama="$(realpath "$llama")"; fi

tmp="$(mktemp -d)"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$out" "$tmp/topologies"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
status=0

echo "== machine: $(machine_line)"
echo "== glassbox: $("$bin" --version 2>/dev/null | head -1) ($profile), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$llama" ]]; then echo "== llama-server: $llama ($("$llama" --version 2>&1 | grep -m1 -i version || echo 'version unknown'))"; fi
echo "== model: $model; $threads threads, $seqs sequences x $ctx context, max_tokens $max_tokens, greedy"

# --- part 1: side by side ---------------------------------------------------
if [[ "${SIDE:-1}" == 1 ]]; then
  lport="$(free_port)"
  # shellcheck disable=SC2086 # LLAMA_ARGS is a list of words.
  "$llama" -m "$model" -t "$threads" -tb "$threads" -np "$seqs" -c "$((seqs * ctx))" \
    --host 127.0.0.1 --port "$lport" -a smollm2 --no-webui ${LLAMA_ARGS:-} \
    >"$tmp/llama-server.log" 2>&1 &
  pids+=($!)
  llama_pid=$!

  jq -n --arg model "$model" --arg system "$system" --argjson threads "$threads" \
    --argjson ctx "$ctx" --argjson seqs "$seqs" --argjson max_tokens "$max_tokens" '{
    topology_id: "serving-bench", version: "1.0.0",
    description: "one local llm_inference node, for scripts/bench-serving.sh",
    defaults: {timeout_ms: 600000, retries: 0},
    nodes: [{id: "llm", type: "llm_inference", resource: {type: "cpu"},
      config: {backend: "local", model: $model, system: $system,
        prompt: "{{ input.question }}", max_tokens: $max_tokens, temperature: 0, seed: 42,
        threads: $threads, context_size: $ctx, max_num_seqs: $seqs}}],
    edges: []}' >"$tmp/topologies/serving-bench.json"
  # More room than streams, so the server's admission gate never answers 429.
  printf '[topologies.serving-bench]\nmax_concurrency = %d\n' "$((seqs * 4))" >"$tmp/server.toml"
  gport="$(free_port)"
  "$bin" serve --topologies "$tmp/topologies" --port "$gport" --config "$tmp/server.toml" \
    --store "sqlite://$tmp/traces.db" >"$tmp/glassbox.log" 2>&1 &
  pids+=($!)
  glassbox_pid=$!

  wait_for "http://127.0.0.1:$lport/health" "$llama_pid" "$tmp/llama-server.log" llama-server
  wait_for "http://127.0.0.1:$gport/readyz" "$glassbox_pid" "$tmp/glassbox.log" "glassbox serve"
  curl -fsS "http://127.0.0.1:$gport/v1/topologies/serving-bench" >/dev/null ||
    { echo "serving-bench topology not served; glassbox log:" >&2; tail -40 "$tmp/glassbox.log" >&2; exit 1; }

  echo
  echo "== side by side: $requests requests per server and level, streams: $concurrencies"
  meta="$(jq -n --arg llama "$llama" --arg glassbox "$bin" --arg model "$model" \
    --argjson threads "$threads" --argjson ctx "$ctx" --argjson seqs "$seqs" \
    --arg llama_args "${LLAMA_ARGS:-}" --arg commit "$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    '{llama_server: $llama, glassbox: $glassbox, glassbox_commit: $commit, model: $model,
      threads: $threads, ctx_per_seq: $ctx, seqs: $seqs, llama_args: $llama_args, load_before: $load}')"
  python3 scripts/bench_serving.py \
    --target "glassbox=http://127.0.0.1:$gport=serving-bench" \
    --target "llama-server=http://127.0.0.1:$lport=smollm2" \
    --prompts "$prompts" --system "$system" --concurrency "${concurrencies// /,}" \
    --requests "$requests" --max-tokens "$max_tokens" --warmup "$warmup" --level-warmup "$level_warmup" \
    --json "$out/serving-$stamp.json" --meta "$meta" || status=1

  echo
  echo "glassbox /metrics:"
  curl -fsS "http://127.0.0.1:$gport/metrics" | grep -E '^glassbox_llm_' | sed 's/^/  /' | head -20 || true
  widest="$(tr ' ' '\n' <<<"$concurrencies" | sort -n | tail -1)"
  sent=$((requests * $(wc -w <<<"$concurrencies")))
  if [[ "$warmup" -gt 0 ]]; then sent=$((sent + warmup + widest)); fi
  for c in $concurrencies; do sent=$((sent + c * level_warmup)); done
  traced="$(curl -fsS "http://127.0.0.1:$gport/v1/traces?topology=serving-bench&limit=1000" | jq '.traces | length')"
  echo "traces stored: $traced of $sent requests"
  if [[ "$sent" -le 1000 && "$traced" != "$sent" ]]; then status=1; fi

  # The targets of issue #15: >= 1.0x llama-server's tok/s, TTFT P99 no worse.
  if [[ -f "$out/serving-$stamp.json" ]]; then
    jq -r '
      [.levels[] | select(.target == "glassbox")] as $g
      | [.levels[] | select(.target == "llama-server")] as $l
      | [range(0; $g | length) as $i
         | {c: $g[$i].concurrency,
            ratio: (if $l[$i].tok_s > 0 then $g[$i].tok_s / $l[$i].tok_s else 0 end),
            ttft: (($g[$i].ttft_ms.p99 // 1e12) <= ($l[$i].ttft_ms.p99 // 0))}]
      | map("streams \(.c): tok/s \(.ratio * 100 | round / 100)x \(if .ratio >= 1 then "ok" else "MISSED" end), TTFT P99 \(if .ttft then "ok" else "MISSED" end)")
      | .[]' "$out/serving-$stamp.json" | sed 's/^/target: /' | tee "$tmp/targets.txt"
    if grep -q MISSED "$tmp/targets.txt"; then status=1; fi
  fi
  stop_all
fi

# --- part 2: rag-chat end to end -------------------------------------------
if [[ "${RAG:-1}" == 1 ]]; then
  rag="$tmp/rag"
  mkdir -p "$rag"
  cp examples/rag-chat/topology.yaml "$rag/rag-chat.yaml"
  cp -r examples/rag-chat/kb "$rag/"
  if [[ -n "${RAG_MAX_NUM_SEQS:-}" ]]; then
    sed -i "s/^      seed: 42$/      seed: 42\n      max_num_seqs: $RAG_MAX_NUM_SEQS/" "$rag/rag-chat.yaml"
    grep -q "max_num_seqs: $RAG_MAX_NUM_SEQS" "$rag/rag-chat.yaml" || die "could not set max_num_seqs in rag-chat"
  fi
  "$bin" index build "$rag/kb" --out "$rag/kb.index" >"$tmp/index.log" 2>&1 ||
    { cat "$tmp/index.log" >&2; exit 1; }
  rport="$(free_port)"
  "$bin" serve --topologies "$rag" --port "$rport" --store "sqlite://$tmp/rag-traces.db" \
    >"$tmp/rag.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$rport/readyz" "$!" "$tmp/rag.log" "glassbox serve (rag-chat)"
  echo
  echo "== rag-chat end to end (closed loop, ${RAG_REQUESTS:-3} requests per client, max_num_seqs ${RAG_MAX_NUM_SEQS:-as in the example})"
  echo "| rag-chat clients | req/s | P50 s | P99 s | ok | errors | timeouts | 429 | traces found / checked |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  rag_bench() {
    "$bin" bench --url "http://127.0.0.1:$rport" --topology rag-chat \
      --inputs examples/rag-chat/questions.txt --timeout 600s --verify-traces --format json "$@"
  }
  # Warm-up (models loaded, caches filled) as a run of its own: `--warmup`
  # would count the warm-up requests' time past its window in the measured
  # run's elapsed time, and so lower its req/s.
  rc=0
  rag_bench -c 2 -n 2 >"$tmp/rag-warmup.json" || rc=$?
  if [[ "$rc" != 0 || "$(jq '.counts.ok != .counts.offered' "$tmp/rag-warmup.json")" == true ]]; then
    echo "rag-chat warm-up failed:" >&2
    jq -c '{counts, traces}' "$tmp/rag-warmup.json" >&2
    status=1
  fi
  : >"$tmp/rag.jsonl"
  for c in ${RAG_CLIENTS:-1 4 8}; do
    rc=0
    rag_bench -c "$c" -n "$((c * ${RAG_REQUESTS:-3}))" >"$tmp/rag-$c.json" || rc=$?
    if [[ "$rc" != 0 ]]; then status=1; fi
    jq -c --argjson c "$c" --argjson rc "$rc" '. + {clients: $c, exit: $rc}' "$tmp/rag-$c.json" >>"$tmp/rag.jsonl"
    # The report's summary fields are at its top level. Timeouts: the
    # client's own, and 504s (a node timeout or the request's deadline).
    jq -r --argjson c "$c" '
      ((.counts.transport_errors.timeout // 0) + (.counts.http_errors["504"] // 0)) as $t
      | "| \($c) | \(.success_rps * 1000 | round / 1000) | \(.latency_ms.p50 | if . then . / 10 | round / 100 else "–" end) | \(.latency_ms.p99 | if . then . / 10 | round / 100 else "–" end) | \(.counts.ok) | \(.counts.offered - .counts.ok - .counts.rejected) | \($t) | \(.counts.rejected) | \(.traces.found) / \(.traces.checked) |"' \
      "$tmp/rag-$c.json"
    if [[ "$(jq '.counts.ok != .counts.offered' "$tmp/rag-$c.json")" == true ]]; then status=1; fi
  done
  jq -s '.' "$tmp/rag.jsonl" >"$out/rag-chat-$stamp.json"
  stop_all
fi

echo
results=""
if [[ "${SIDE:-1}" == 1 ]]; then results+=" $out/serving-$stamp.json"; fi
if [[ "${RAG:-1}" == 1 ]]; then results+=" $out/rag-chat-$stamp.json"; fi
echo "results:$results"
if [[ "$status" != 0 ]]; then
  echo "FAILED: a request failed or timed out, a trace is missing, or a target was missed (above)" >&2
fi
exit "$status"
