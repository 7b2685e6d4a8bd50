#!/usr/bin/env bash
# Quality of per-chunk KV reuse (`kv_reuse: chunks`, ADR 0013; issue #39):
# every rag-chat question answered by the example as it is (exact prefix
# reuse) and by the same topology with `kv_reuse: chunks`, one at a time,
# in order, on one fresh server (so the chunk cache fills as the questions
# go, as in service). Prints, per question, whether the answers are the
# same text, their token-overlap F1 (over lower-cased words), the prompt
# tokens placed from the chunk cache and both TTFTs; then the agreement
# rate, the mean F1, the share of prompt tokens placed and TTFT P50s.
#
#   scripts/rag-reuse-quality.sh
#   RECOMPUTE=0 scripts/rag-reuse-quality.sh          # no correction
#   PREWARM=1 scripts/rag-reuse-quality.sh            # chunk cache filled from the index first
#
# Environment: RECOMPUTE (`chunk_recompute`, default the engine's, 16), PREWARM
# (1: `chunk_prewarm` over the example's index, bench-lib.sh's RAG_PREWARM),
# QUESTIONS (one per line; default the example's questions, then
# examples/rag-chat/questions-more.txt), PROFILE / BIN (as in
# bench-serving.sh), OUT (default target-models/bench), SHORT_QUESTIONS (N:
# the first N questions only). SHORT=1: a smoke run
# (scripts/check-script-order.sh), 1 question; figures meaningless. Writes
# OUT/rag-reuse-STAMP.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
cd "$(dirname "$0")/.."

if [[ ${SHORT:-0} == 1 ]]; then
  : "${SHORT_QUESTIONS:=1}"
fi
profile="${PROFILE:-release}"
out="${OUT:-target-models/bench}"
command -v jq >/dev/null || { echo "rag-reuse-quality: jq is needed" >&2; exit 2; }
bench_bin
yaml_python "${CARGO_TARGET_DIR:-target}" rag-reuse-quality

tmp="$(mktemp -d)"
pid=""
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$out"
rag_setup "$tmp"
questions="$tmp/questions.txt"
prewarm=""
if [[ "${PREWARM:-0}" == 1 ]]; then prewarm="$RAG_PREWARM"; fi
RECOMPUTE="${RECOMPUTE:-}" PREWARM_LINE="$prewarm" "$py" - "$tmp/topologies" <<'EOF'
import os, sys, yaml
dest = sys.argv[1]
with open("examples/rag-chat/topology.yaml", encoding="utf-8") as f:
    topo = yaml.safe_load(f)
topo["defaults"] = dict(topo.get("defaults", {}), timeout_ms=600000, deadline_ms=1200000)
for name, extra in (("rag-exact", {}), ("rag-chunks", {"kv_reuse": "chunks"})):
    t = yaml.safe_load(yaml.safe_dump(topo))
    t["topology_id"] = name
    llm = next(n for n in t["nodes"] if n["id"] == "llm")["config"]
    llm.update(extra)
    if extra and os.environ["RECOMPUTE"]:
        llm["chunk_recompute"] = int(os.environ["RECOMPUTE"])
    if extra and os.environ["PREWARM_LINE"]:
        llm.update(yaml.safe_load(os.environ["PREWARM_LINE"]))
    with open(f"{dest}/{name}.yaml", "w", encoding="utf-8") as f:
        yaml.safe_dump(t, f, sort_keys=False, allow_unicode=True)
EOF
port="$(free_port)"
"$bin" serve --topologies "$tmp/topologies" --port "$port" --store "sqlite://$tmp/traces.db" \
  >"$tmp/serve.log" 2>&1 &
pid=$!
wait_for "http://127.0.0.1:$port/readyz" "$pid" "$tmp/serve.log" "glassbox serve"
echo "== machine: $(machine_line)"
echo "== glassbox: $("$bin" --version 2>/dev/null | head -1) ($profile), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), chunk_recompute ${RECOMPUTE:-default}${prewarm:+, chunk cache prewarmed from the index}"
run() { # TOPOLOGY QUESTION -> the run's JSON
  curl -fsS "http://127.0.0.1:$port/v1/topologies/$1/runs" -H 'content-type: application/json' \
    -d "$(jq -n --arg q "$2" '{question: $q}')"
}
: >"$tmp/answers.jsonl"
trace() { # REQUEST-ID -> the llm span of its trace
  curl -fsS "http://127.0.0.1:$port/v1/traces/$1" | jq -c '[.spans[] | select(.node == "llm")][0]'
}
while IFS= read -r q; do
  exact="$(run rag-exact "$q")"
  chunks="$(run rag-chunks "$q")"
  te="$(trace "$(jq -r .request_id <<<"$exact")")"
  tc="$(trace "$(jq -r .request_id <<<"$chunks")")"
  jq -cn --arg q "$q" --argjson e "$exact" --argjson c "$chunks" --argjson te "$te" --argjson tc "$tc" '{question: $q,
    exact: $e.output.text, chunks: $c.output.text,
    placed: ($tc.tags.prompt_placed_tokens // "0" | tonumber),
    cached: ($tc.tags.prompt_cached_tokens // "0" | tonumber),
    prompt_tokens: ($tc.usage.input_tokens // 0),
    ttft_exact: ($te.tags.ttft_ms // "0" | tonumber), ttft_chunks: ($tc.tags.ttft_ms // "0" | tonumber)}' \
    >>"$tmp/answers.jsonl"
done <"$questions"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
python3 - "$tmp/answers.jsonl" "$out/rag-reuse-$stamp.json" <<'EOF'
import json, re, sys
from collections import Counter
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
def f1(a, b):
    ta, tb = re.findall(r"\w+", a.lower()), re.findall(r"\w+", b.lower())
    if not ta and not tb:
        return 1.0
    common = sum((Counter(ta) & Counter(tb)).values())
    if common == 0:
        return 0.0
    p, r = common / len(tb), common / len(ta)
    return 2 * p * r / (p + r)
print("| # | same | F1 | placed / prefix-cached / prompt tokens | TTFT exact / chunks ms | question |")
print("|---:|:---:|---:|---:|---:|---|")
for i, r in enumerate(rows, 1):
    r["same"] = r["exact"] == r["chunks"]
    r["f1"] = f1(r["exact"] or "", r["chunks"] or "")
    print(f"| {i} | {'yes' if r['same'] else 'no'} | {r['f1']:.2f} | {r['placed']} / {r['cached']} / {r['prompt_tokens']} | {r['ttft_exact']:.0f} / {r['ttft_chunks']:.0f} | {r['question']} |")
n = len(rows)
same = sum(r["same"] for r in rows)
placed = sum(r["placed"] for r in rows)
prompt = sum(r["prompt_tokens"] for r in rows)
def p50(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0
print(f"\n{n} questions: {same} identical answers ({100 * same / n:.0f}%), mean token F1 {sum(r['f1'] for r in rows) / n:.3f}, "
      f"{placed} of {prompt} prompt tokens placed from the chunk cache ({100 * placed / max(prompt, 1):.0f}%); "
      f"TTFT P50 exact {p50([r['ttft_exact'] for r in rows]):.0f} ms, chunks {p50([r['ttft_chunks'] for r in rows]):.0f} ms (one request at a time)")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(rows, f, indent=1)
print(f"results: {sys.argv[2]}")
EOF
