#!/usr/bin/env bash
# RAG serving benchmark (docs/BENCHMARKS.md, "RAG serving: rag-chat vs
# llama-server"; issue #39). One command, one run:
#
#  - glassbox: `glassbox serve` on a copy of examples/rag-chat (router,
#    MiniLM embedding, HNSW retrieval, template, SmolLM2 through llama.cpp,
#    output guard), driven through its OpenAI-compatible endpoint with the
#    questions alone;
#  - llama-server: the same GGUF file, threads and sequences, prompt cache
#    on (its default), sent the very prompts glassbox's `llm` node sends
#    (the system message and the rendered template, captured first through
#    the same topology minus the LLM), so both evaluate the same tokens;
#  - at 1, 4 and 8 closed-loop clients, each level on fresh servers with a
#    fresh run of first-time questions (what a prefix cache has not seen),
#    after one warm-up request with a question outside the set:
#    req/s, TTFT and E2E P50/P95/P99, and how many answers are the same text
#    from both.
#
#   scripts/bench-rag.sh
#   CLIENTS="1 4" REQUESTS=8 scripts/bench-rag.sh            # quicker
#   SIDE=0 scripts/bench-rag.sh                              # glassbox alone
#
# Environment: LLAMA_SERVER / LLAMA_CPP_SRC (the peer, as in
# bench-serving.sh; with neither, scripts/build-llama-server.sh builds it and
# runs it on this glassbox's libllama and ggml), SIDE (0: no peer), CLIENTS
# (default "1 4 8"), REQUESTS (per level, default 2 × clients, at least 8),
# SEQS (`max_num_seqs` of the `llm` node and llama-server's `-np`, default 8),
# THREADS (default: one per physical core, 2 on
# the 2-core VM of docs/BENCHMARKS.md), CTX (context per sequence, default 2048), QUESTIONS
# (one per line; default the example's product questions, then
# examples/rag-chat/questions-more.txt), TOPOLOGY_SET (lines `key: value`
# added to the `llm` node's config, e.g. "prefill_chunk: 128"), CHUNK_ORDER
# (the `prompt` node's `chunk_order`; default: as in the example), WARM (N:
# before each level, the last N questions are sent to glassbox one at a time,
# so a chunk cache (`kv_reuse: chunks`) holds their chunks as in service;
# default 0: first-time questions on an empty cache), PROFILE /
# BIN (as in bench-serving.sh), OUT (default target-models/bench),
# SHORT_QUESTIONS (N: the first N questions only), PREWARM (1: `kv_reuse:
# chunks` with `chunk_prewarm` over the example's index, bench-lib.sh's
# RAG_PREWARM, before TOPOLOGY_SET), KEEP (a directory: each
# level's glassbox trace store and log are copied there, to read the
# requests' spans afterwards). SHORT=1: a smoke run
# (scripts/check-script-order.sh): glassbox alone, 1 client, 1 request,
# WARM=1, 4 questions; figures meaningless.
# Writes OUT/rag-STAMP.json. Exit 1 on a failed request.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

# PREWARM=1: chunk mode with its cache filled from the index at load.
if [[ ${PREWARM:-0} == 1 ]]; then
  TOPOLOGY_SET="kv_reuse: chunks"$'\n'"$RAG_PREWARM"${TOPOLOGY_SET:+$'\n'"$TOPOLOGY_SET"}
fi
if [[ ${SHORT:-0} == 1 ]]; then
  : "${SIDE:=0}" "${CLIENTS:=1}" "${REQUESTS:=1}" "${WARM:=1}" "${SHORT_QUESTIONS:=4}"
fi
threads="${THREADS:-$(physical_cores)}"
ctx="${CTX:-2048}"
seqs="${SEQS:-8}"
clients="${CLIENTS:-1 4 8}"
profile="${PROFILE:-release}"
out="${OUT:-target-models/bench}"
models_dir="${GLASSBOX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/glassbox/models}"
model="$models_dir/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
die() {
  echo "bench-rag: $*" >&2
  exit 2
}
[[ -f "$model" ]] || die "no model at $model (scripts/fetch-models.sh fetches it)"
command -v jq >/dev/null || die "jq is needed"
yaml_python "${CARGO_TARGET_DIR:-target}" bench-rag
bench_bin
llama="${LLAMA_SERVER:-}"
if [[ -z "$llama" && -n "${LLAMA_CPP_SRC:-}" ]]; then
  for candidate in "$LLAMA_CPP_SRC"/build*/bin/llama-server; do
    [[ -x "$candidate" ]] && llama="$candidate" && break
  done
fi
if [[ "${SIDE:-1}" == 1 && -z "$llama" ]]; then
  llama="$(scripts/build-llama-server.sh --libs "$(dirname "$bin")" | tail -1)"
fi
if [[ "${SIDE:-1}" == 1 ]]; then
  [[ -x "$llama" ]] || die "no llama-server binary at '$llama'"
  llama="$(realpath "$llama")"
fi

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
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$out"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"

# --- the questions and the topologies ---------------------------------------
rag_setup "$tmp"
questions="$tmp/questions.txt"
# rag-chat with the benchmark's settings, and rag-prompts: the same
# topology up to the `llm` node, whose output is the user message that
# node renders (its `prompt` template), and the system message.
SEQS="$seqs" THREADS="$threads" CTX="$ctx" TOPOLOGY_SET="${TOPOLOGY_SET:-}" \
  CHUNK_ORDER="${CHUNK_ORDER:-}" "$py" - "$tmp/topologies" <<'EOF'
import json, os, sys, yaml
dest = sys.argv[1]
with open("examples/rag-chat/topology.yaml", encoding="utf-8") as f:
    topo = yaml.safe_load(f)
by_id = {n["id"]: n for n in topo["nodes"]}
llm = by_id["llm"]["config"]
# Queueing at 8 clients on 2 cores can pass the example's 60 s node timeout;
# this measures throughput, not timeouts.
topo["defaults"] = dict(topo.get("defaults", {}), timeout_ms=600000, deadline_ms=1200000)
llm.update(max_num_seqs=int(os.environ["SEQS"]), threads=int(os.environ["THREADS"]),
           context_size=int(os.environ["CTX"]))
for line in os.environ["TOPOLOGY_SET"].splitlines():
    if line.strip():
        llm.update(yaml.safe_load(line))
if os.environ["CHUNK_ORDER"]:
    by_id["prompt"]["config"]["chunk_order"] = os.environ["CHUNK_ORDER"]
with open(f"{dest}/rag-chat.yaml", "w", encoding="utf-8") as f:
    yaml.safe_dump(topo, f, sort_keys=False, allow_unicode=True)
capture = dict(topo, topology_id="rag-prompts",
               description="rag-chat up to the llm node's prompt (scripts/bench-rag.sh)")
capture["nodes"] = [n for n in topo["nodes"] if n["id"] not in ("llm", "validate")] + [
    {"id": "user", "type": "template", "resource": {"type": "cpu"},
     "config": {"template": llm["prompt"]}}]
capture["edges"] = [e for e in topo["edges"] if e["to"] not in ("llm", "validate")] + [
    {"from": "prompt", "to": "user"}]
with open(f"{dest}/rag-prompts.yaml", "w", encoding="utf-8") as f:
    yaml.safe_dump(capture, f, sort_keys=False, allow_unicode=True)
with open(f"{dest}/../system.txt", "w", encoding="utf-8") as f:
    f.write(llm.get("system", ""))
EOF

start_glassbox() {
  gport="$(free_port)"
  printf '[topologies.rag-chat]\nmax_concurrency = 64\n' >"$tmp/server.toml"
  "$bin" serve --topologies "$tmp/topologies" --port "$gport" --config "$tmp/server.toml" \
    --store "sqlite://$tmp/traces-$1.db" >"$tmp/glassbox-$1.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$gport/readyz" "$!" "$tmp/glassbox-$1.log" "glassbox serve"
}
start_llama() {
  lport="$(free_port)"
  "$llama" -m "$model" -t "$threads" -tb "$threads" -np "$seqs" -c "$((seqs * ctx))" \
    --host 127.0.0.1 --port "$lport" -a smollm2 --no-webui ${LLAMA_ARGS:-} \
    >"$tmp/llama-$1.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$lport/health" "$!" "$tmp/llama-$1.log" llama-server
}
chat() { # URL MODEL MESSAGES-JSON
  curl -fsS "$1/v1/chat/completions" -H 'content-type: application/json' \
    -d "$(jq -n --arg m "$2" --argjson msgs "$3" '{model: $m, messages: $msgs, max_tokens: 80, temperature: 0, seed: 42}')" >/dev/null
}

# The prompts glassbox's llm node sends, captured through rag-prompts (the
# warm-up question's last).
warm_question="Is the kettle dishwasher safe?"
start_glassbox capture
messages="$tmp/messages.jsonl"
: >"$messages"
while IFS= read -r q; do
  user="$(curl -fsS "http://127.0.0.1:$gport/v1/topologies/rag-prompts/runs" \
    -H 'content-type: application/json' -d "$(jq -n --arg q "$q" '{question: $q}')" |
    jq -r '.output.text')"
  jq -cn --rawfile sys "$tmp/system.txt" --arg user "$user" \
    '[{role: "system", content: $sys}, {role: "user", content: $user}]' >>"$messages"
done < <(cat "$questions"; echo "$warm_question")
tail -1 "$messages" >"$tmp/warm.json"
sed -i '$d' "$messages"
stop_all
echo "== machine: $(machine_line)"
echo "== glassbox: $("$bin" --version 2>/dev/null | head -1) ($profile), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$llama" ]] && echo "== llama-server: $llama"
echo "== rag-chat: $(wc -l <"$questions") questions, $seqs sequences x $ctx context, $threads threads, greedy, max_tokens 80${TOPOLOGY_SET:+, llm: $TOPOLOGY_SET}${CHUNK_ORDER:+, chunk_order: $CHUNK_ORDER}${WARM:+, warmed with the last $WARM questions}"

# --- the levels -------------------------------------------------------------
# The prefix cache's counters of the glassbox server now running.
prefix_stats() {
  curl -fsS "http://127.0.0.1:$gport/metrics" |
    grep -E '^glassbox_llm_(prefix_cache_(hits|queries)|chunk_cache_placed_tokens)' || true
}
status=0
warm="$(jq -cn --arg q "$warm_question" '[{role: "user", content: $q}]')"
for c in $clients; do
  n="${REQUESTS:-$((c * 2 > 8 ? c * 2 : 8))}"
  start_glassbox "$c"
  targets=(--target "glassbox=http://127.0.0.1:$gport=rag-chat")
  chat "http://127.0.0.1:$gport" rag-chat "$warm"
  while IFS= read -r q; do
    chat "http://127.0.0.1:$gport" rag-chat "$(jq -cn --arg q "$q" '[{role: "user", content: $q}]')"
  done < <(tail -n "${WARM:-0}" "$questions" | head -n "${WARM:-0}")
  if [[ "${SIDE:-1}" == 1 ]]; then
    start_llama "$c"
    targets+=(--target "llama-server=http://127.0.0.1:$lport=smollm2" --messages "llama-server=$messages")
    chat "http://127.0.0.1:$lport" smollm2 "$(cat "$tmp/warm.json")"
  fi
  prefix_stats >"$tmp/prefix-before-$c.txt"
  echo "-- $c client(s), $n requests each server, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  python3 scripts/bench_serving.py "${targets[@]}" --prompts "$questions" --concurrency "$c" \
    --requests "$n" --max-tokens 80 --warmup 0 --level-warmup 0 --table requests \
    --json "$tmp/level-$c.json" >"$tmp/level-$c.txt" || status=1
  prefix_stats >"$tmp/prefix-$c.txt"
  stop_all
  if [[ -n "${KEEP:-}" ]]; then
    mkdir -p "$KEEP"
    cp -r "$tmp/traces-$c.db"* "$tmp/glassbox-$c.log" "$KEEP/"
  fi
done

# --- the table --------------------------------------------------------------
python3 - "$tmp" "$out/rag-$stamp.json" $clients <<'EOF'
import json, re, sys
tmp, dest, levels = sys.argv[1], sys.argv[2], [int(c) for c in sys.argv[3:]]
docs, rows = {}, []
for c in levels:
    with open(f"{tmp}/level-{c}.json", encoding="utf-8") as f:
        docs[c] = json.load(f)
    # The measured requests' prompt tokens and prefix-cache hits (the
    # counters after the level less those after the warm-up).
    prefix = {}
    for name, sign in ((f"prefix-{c}", 1), (f"prefix-before-{c}", -1)):
        with open(f"{tmp}/{name}.txt", encoding="utf-8") as f:
            for line in f:
                key = re.sub(r"\{.*\}", "", line.split()[0]).rsplit("_", 1)[-1]
                prefix[key] = prefix.get(key, 0) + sign * float(line.split()[-1])
    docs[c]["glassbox_prefix_cache"] = prefix
    print(f"\n{c} client(s):")
    print(docs[c]["table"])
    if prefix.get("queries"):
        print(f"glassbox prefix cache: {prefix.get('hits', 0):.0f} of {prefix['queries']:.0f} prompt tokens reused ({100 * prefix.get('hits', 0) / prefix['queries']:.1f}%)")
        if prefix.get("tokens"):
            print(f"glassbox chunk cache (kv_reuse: chunks): {prefix['tokens']:.0f} of {prefix['queries']:.0f} prompt tokens placed ({100 * prefix['tokens'] / prefix['queries']:.1f}%)")
by = {(lv["target"], lv["concurrency"]): lv for d in docs.values() for lv in d["levels"]}
one = by.get(("glassbox", min(levels)))
print("\ntargets:")
for c in levels:
    g, l = by.get(("glassbox", c)), by.get(("llama-server", c))
    line = f"  {c} client(s): glassbox {g['req_s']:.3f} req/s, E2E P50 {g['e2e_ms']['p50'] / 1000:.2f} s"
    if one and c != min(levels):
        line += f" ({g['req_s'] / one['req_s']:.2f}x the req/s of {min(levels)} client, P50 {g['e2e_ms']['p50'] / one['e2e_ms']['p50']:.2f}x)"
    if l:
        line += f"; llama-server {l['req_s']:.3f} req/s ({g['req_s'] / l['req_s']:.2f}x), E2E P50 {l['e2e_ms']['p50'] / 1000:.2f} s"
    print(line)
with open(dest, "w", encoding="utf-8") as f:
    json.dump({"levels": levels, "runs": {str(c): d for c, d in docs.items()}}, f, indent=1)
print(f"\nresults: {dest}")
EOF
if [[ "$status" != 0 ]]; then echo "FAILED: a request failed (above)" >&2; fi
exit "$status"
