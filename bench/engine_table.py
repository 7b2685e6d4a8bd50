"""Prints the engine-overhead comparison table from JSON-lines results.

Usage: python3 bench/engine_table.py [--no-check] RESULTS.jsonl [MORE.jsonl ...]

Per-node overhead is the mean latency of one request at a time divided by
the nodes it runs; "× slower" is a peer's per-node overhead over Glassbox's.
Checks the issue's targets: >= 20,000 req/s for rag6 (Glassbox, all
cores) and Glassbox per-node overhead <= 1/20 of the faster peer's.
"""

import json
import sys


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows += [json.loads(line) for line in f if line.strip().startswith("{")]
    return rows


def main():
    args = sys.argv[1:]
    check = "--no-check" not in args
    rows = load([a for a in args if a != "--no-check"])
    gb = {r["topology"]: r for r in rows if r["framework"] == "glassbox"}
    print("| topology | framework | req/s (1 at a time) | req/s (all cores) | µs per node "
          "| P50 µs | P95 µs | P99 µs | per-node overhead vs Glassbox |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for topo in ["rag6", "fan50"]:
        base = gb.get(topo)
        peers = [r for r in rows if r["topology"] == topo and r["framework"] != "glassbox"]
        for r in ([base] if base else []) + peers:
            name = r["framework"] + (f" {r['version']}" if r.get("version") else "")
            ratio = "1×" if r is base else (
                f"{r['us_per_node'] / base['us_per_node']:.1f}× slower" if base else "-")
            rps = f"{r['rps']:,.0f}" if "rps" in r else "-"
            print(f"| {topo} | {name} | {r['seq_rps']:,.0f} | {rps} | {r['us_per_node']:.2f} "
                  f"| {r['p50_us']:.1f} | {r['p95_us']:.1f} | {r['p99_us']:.1f} | {ratio} |")
        if base and peers:
            fastest = min(peers, key=lambda r: r["us_per_node"])
            ratio = fastest["us_per_node"] / base["us_per_node"]
            passed = ratio >= 20
            ok &= passed
            print(f"\n{topo}: Glassbox per-node overhead is 1/{ratio:.0f} of the faster peer "
                  f"({fastest['framework']}); target ≤ 1/20: {'PASS' if passed else 'FAIL'}",
                  file=sys.stderr)
    if "rag6" in gb:
        rps = gb["rag6"]["rps"]
        passed = rps >= 20_000
        ok &= passed
        print(f"rag6: {rps:,.0f} req/s on {gb['rag6']['workers']} cores; target ≥ 20,000: "
              f"{'PASS' if passed else 'FAIL'}", file=sys.stderr)
    sys.exit(0 if ok or not check else 1)


if __name__ == "__main__":
    main()
