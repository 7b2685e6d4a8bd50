#!/usr/bin/env python3
"""Load client and chart for scripts/bench-failover.sh (docs/BENCHMARKS.md,
"Failover under load").

Three commands, standard library only:

    bench_failover.py capacity --url URL --questions FILE --clients 4 --seconds 20
        Closed loop, no pause: the pool's completed RAG runs per second and
        their latency P50 / P95 / P99 (printed as JSON: {"rps": ...,
        "p50_s": ...}). The first --warmup seconds are not counted.

    bench_failover.py run --url URL --questions FILE --clients 4 --rate R \\
                          --seconds 60 --kill-at 20 --kill-pid PID \\
                          --kill-metrics http://WORKER --out run.jsonl
        Closed-loop clients paced to R runs/s in all (each client sends its
        next request one period after the previous one started, or at once
        when that one took longer: a client never has two requests out).
        At --kill-at seconds the worker PID is killed with SIGKILL while it
        decodes (its vLLM-style running gauge above 0 and its token counter
        moving, as the cluster tests wait for). One JSON line per request:
        start and end in seconds from the kill, HTTP status, error code.

    bench_failover.py chart --run LABEL=run.jsonl ... --svg out.svg
        Buckets every run's requests by the second they ended in (relative
        to the kill): goodput (HTTP 200 answers per second) and the P99
        latency of those answers; draws both over time, one line per run,
        as an SVG; prints a Markdown table per run (requests, failures by
        status, goodput and P99 before the kill, in the 20 s after it, and
        after that; the worst 1 s P99 and the longest time without any
        answer after the kill).

The questions are the RAG example's product questions (the lines of
examples/rag-chat/questions.txt before `---`), in turn.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


def questions(path: str) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() == "---":
                break
            if line.strip():
                out.append(line.strip())
    if not out:
        sys.exit(f"bench_failover: no questions in {path}")
    return out


def post(url: str, question: str, timeout: float) -> tuple[int, str]:
    """One run of rag-chat: (HTTP status, error code or "")."""
    body = json.dumps({"question": question}).encode()
    req = urllib.request.Request(
        f"{url}/v1/topologies/rag-chat/runs",
        data=body,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, ""
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            code = json.loads(text).get("error", {}).get("code", "")
        except (ValueError, AttributeError):
            code = ""
        return e.code, code or "http"
    except OSError as e:  # refused, reset, timed out
        return 0, type(e).__name__


def clients_loop(url, qs, clients, period, stop_at, t0, out, timeout, offset=0):
    """`clients` threads; each sends, waits, then waits out its period.
    Times are kept in seconds from `t0`."""
    lock = threading.Lock()

    def client(c: int) -> None:
        n = c + offset
        # Staggered starts, so the pace is even from the first second.
        next_at = time.monotonic() + period * c / max(clients, 1)
        while True:
            now = time.monotonic()
            if next_at > now:
                time.sleep(next_at - now)
            start = time.monotonic()
            if start >= stop_at:
                return
            status, code = post(url, qs[n % len(qs)], timeout)
            end = time.monotonic()
            n += clients
            with lock:
                out.append(
                    {
                        "client": c,
                        "start": start - t0,
                        "end": end - t0,
                        "status": status,
                        "code": code,
                    }
                )
            next_at = start + period

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    return threads


def metric(base: str, name: str) -> float:
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    total = 0.0
    for line in text.splitlines():
        if line.split("{")[0].split(" ")[0] == name:
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


def kill_while_decoding(pid: int, base: str, limit: float) -> str:
    """SIGKILL once the worker decodes (or after `limit` s regardless)."""
    until = time.monotonic() + limit
    tokens = metric(base, "glassbox_llm_generation_tokens")
    while time.monotonic() < until:
        time.sleep(0.02)
        now = metric(base, "glassbox_llm_generation_tokens")
        running = metric(base, "glassbox_llm_num_requests_running")
        if now > tokens and running > 0:
            os.kill(pid, signal.SIGKILL)
            return "while decoding"
        tokens = now
    os.kill(pid, signal.SIGKILL)
    return f"after {limit:.0f} s without seeing it decode"


def cmd_capacity(a) -> None:
    qs = questions(a.questions)
    done: list[dict] = []
    begin = time.monotonic()
    stop_at = begin + a.warmup + a.seconds
    threads = clients_loop(a.url, qs, a.clients, 0.0, stop_at, begin, done, a.timeout)
    for t in threads:
        t.join()
    counted = [
        r for r in done if r["status"] == 200 and a.warmup <= r["end"] <= a.warmup + a.seconds
    ]
    failed = sum(1 for r in done if r["status"] != 200)
    lat = [r["end"] - r["start"] for r in counted]

    def pct(q: float) -> float | None:
        v = percentile(lat, q)
        return None if v is None else round(v, 3)

    print(
        json.dumps(
            {
                "rps": len(counted) / a.seconds,
                "failed": failed,
                "requests": len(done),
                "p50_s": pct(0.5),
                "p95_s": pct(0.95),
                "p99_s": pct(0.99),
            }
        )
    )


def cmd_run(a) -> None:
    qs = questions(a.questions)
    done: list[dict] = []
    begin = time.monotonic()
    period = a.clients / a.rate
    threads = clients_loop(
        a.url, qs, a.clients, period, begin + a.seconds, begin, done, a.timeout, a.offset
    )
    time.sleep(max(0.0, a.kill_at - (time.monotonic() - begin)))
    how = kill_while_decoding(a.kill_pid, a.kill_metrics, 10.0)
    killed = time.monotonic() - begin
    for t in threads:
        t.join()
    with open(a.out, "w", encoding="utf-8") as f:
        for r in sorted(done, key=lambda r: r["start"]):
            r["start"] = round(r["start"] - killed, 4)
            r["end"] = round(r["end"] - killed, 4)
            f.write(json.dumps(r) + "\n")
    print(f"killed the worker {how}, {killed:.1f} s into the run; {len(done)} requests")


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank q-quantile (0 < q <= 1); None for no values."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, math.ceil(q * len(v)) - 1)]


def p99(values: list[float]) -> float | None:
    return percentile(values, 0.99)


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def buckets(rows: list[dict], lo: int, hi: int) -> list[tuple[int, int, float | None]]:
    """(second, goodput, P99 latency s) for each second in [lo, hi)."""
    out = []
    for s in range(lo, hi):
        ok = [r["end"] - r["start"] for r in rows if r["status"] == 200 and s <= r["end"] < s + 1]
        out.append((s, len(ok), p99(ok)))
    return out


def window(rows: list[dict], lo: float, hi: float) -> dict:
    inside = [r for r in rows if lo <= r["end"] < hi]
    ok = [r["end"] - r["start"] for r in inside if r["status"] == 200]
    return {
        "goodput": len(ok) / (hi - lo) if hi > lo else 0.0,
        "p99": p99(ok),
    }


def status_counts(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        if r["status"] != 200:
            key = f'{r["status"] or "no answer"} {r["code"]}'.strip()
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} × {k}" for k, n in sorted(counts.items())) or "none"


def svg(runs: list[tuple[str, list, list]], lo: int, hi: int) -> str:
    """Two panels over time; `runs` are (label, buckets, failed end times)."""
    w, h, left, right, top, panel, gap = 760, 430, 60, 150, 30, 160, 50
    colours = ["#c0392b", "#1f6fb2", "#2e8b57", "#8e44ad"]
    width = w - left - right
    goodmax = max([g for _, b, _ in runs for _, g, _ in b] + [1])
    latmax = max([p for _, b, _ in runs for _, _, p in b if p is not None] + [1.0])
    goodmax = 2 * math.ceil(goodmax / 2)
    latmax = 10 * math.ceil(latmax / 10)

    def x(s: float) -> float:
        return left + (s - lo) / (hi - lo) * width

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
    ]
    for i, (title, vmax, unit, pick) in enumerate(
        [
            ("goodput: HTTP 200 answers per second", goodmax, "", lambda b: b[1]),
            ("P99 latency of those answers (s)", latmax, " s", lambda b: b[2]),
        ]
    ):
        y0 = top + i * (panel + gap)

        def y(v: float) -> float:
            return y0 + panel - v / vmax * panel

        parts.append(f'<text x="{left}" y="{y0 - 8}" font-weight="bold">{title}</text>')
        parts.append(
            f'<rect x="{left}" y="{y0}" width="{width}" height="{panel}" fill="none" stroke="#999"/>'
        )
        for k in range(5):
            v = vmax * k / 4
            parts.append(
                f'<line x1="{left}" x2="{left + width}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}{unit}</text>'
            )
        for s in range(10 * math.ceil(lo / 10), hi + 1, 10):
            parts.append(
                f'<text x="{x(s):.1f}" y="{y0 + panel + 14}" text-anchor="middle">{s:+d} s</text>'
            )
        parts.append(
            f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{y0}" y2="{y0 + panel}" '
            'stroke="black" stroke-dasharray="4 3"/>'
        )
        if i == 0:
            parts.append(f'<text x="{x(0) + 4:.1f}" y="{y0 + 12}">kill -9 of a worker</text>')
        for j, (label, b, failed) in enumerate(runs):
            colour = colours[j % len(colours)]
            if i == 0:
                # Each failed answer: a cross on the axis, at its second.
                for t in failed:
                    cx, cy = x(t), y0 + panel - 4 - 6 * j
                    parts.append(
                        f'<path d="M{cx - 3:.1f},{cy - 3:.1f}l6,6m0,-6l-6,6" stroke="{colour}"/>'
                    )
            segs, cur = [], []
            for bucket in b:
                v = pick(bucket)
                if v is None:
                    if cur:
                        segs.append(cur)
                    cur = []
                    continue
                cur.append(f"{x(bucket[0] + 0.5):.1f},{y(v):.1f}")
            if cur:
                segs.append(cur)
            for seg in segs:
                if len(seg) == 1:
                    cx, cy = seg[0].split(",")
                    parts.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"/>')
                else:
                    parts.append(
                        f'<polyline points="{" ".join(seg)}" fill="none" stroke="{colour}" stroke-width="1.6"/>'
                    )
            if i == 0:
                ly = top + 20 + j * 18
                parts.append(
                    f'<line x1="{w - right + 12}" x2="{w - right + 32}" y1="{ly}" y2="{ly}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                    f'<text x="{w - right + 36}" y="{ly + 4}">{label}</text>'
                )
    parts.append(
        f'<text x="{w - right + 12}" y="{top + 20 + len(runs) * 18 + 4}">'
        "× a failed answer</text>"
    )
    parts.append(
        f'<text x="{left + width / 2}" y="{h - 6}" text-anchor="middle">'
        "seconds from the kill (1 s buckets, by the second an answer ended)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def cmd_chart(a) -> None:
    runs = []
    for spec in a.run:
        label, _, path = spec.partition("=")
        runs.append((label, load(path)))
    lo = math.floor(min(r["start"] for _, rows in runs for r in rows))
    hi = math.ceil(max(r["end"] for _, rows in runs for r in rows))
    bucketed = [(label, buckets(rows, lo, hi)) for label, rows in runs]
    failed = [[r["end"] for r in rows if r["status"] != 200] for _, rows in runs]
    drawn = [(label, b, f) for (label, b), f in zip(bucketed, failed)]
    with open(a.svg, "w", encoding="utf-8") as f:
        f.write(svg(drawn, lo, hi))
    after = a.settle
    print(
        f"| run | requests | failed (status × code) | goodput before the kill | "
        f"goodput 0-{after} s after | goodput after {after} s | P99 before | "
        f"P99 0-{after} s after | P99 after {after} s | worst 1 s P99 after the kill | "
        f"longest wait for an answer after the kill |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (label, rows), (_, b) in zip(runs, bucketed):
        before = window(rows, lo, 0)
        early = window(rows, 0, after)
        late = window(rows, after, hi)
        worst = max((p for s, _, p in b if s >= 0 and p is not None), default=None)
        # From the kill, the longest time with no HTTP 200 answer at all.
        ends = sorted([0.0] + [r["end"] for r in rows if r["status"] == 200 and r["end"] >= 0])
        gap = max(b2 - a2 for a2, b2 in zip(ends, ends[1:])) if len(ends) > 1 else None
        failed = sum(1 for r in rows if r["status"] != 200)

        def f(v, unit=""):
            return "-" if v is None else f"{v:.2f}{unit}"

        print(
            f"| {label} | {len(rows)} | {failed} ({status_counts(rows)}) | "
            f"{f(before['goodput'])}/s | {f(early['goodput'])}/s | {f(late['goodput'])}/s | "
            f"{f(before['p99'], ' s')} | {f(early['p99'], ' s')} | {f(late['p99'], ' s')} | "
            f"{f(worst, ' s')} | {f(gap, ' s')} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("capacity", "run"):
        s = sub.add_parser(name)
        s.add_argument("--url", required=True)
        s.add_argument("--questions", required=True)
        s.add_argument("--clients", type=int, default=4)
        s.add_argument("--seconds", type=float, default=20)
        s.add_argument("--timeout", type=float, default=180)
    cap = sub.choices["capacity"]
    cap.add_argument("--warmup", type=float, default=5)
    run = sub.choices["run"]
    run.add_argument("--rate", type=float, required=True)
    run.add_argument("--kill-at", type=float, default=20)
    run.add_argument("--kill-pid", type=int, required=True)
    run.add_argument("--kill-metrics", required=True)
    run.add_argument("--offset", type=int, default=0)
    run.add_argument("--out", required=True)
    chart = sub.add_parser("chart")
    chart.add_argument("--run", action="append", required=True)
    chart.add_argument("--svg", required=True)
    chart.add_argument("--settle", type=int, default=20)
    a = p.parse_args()
    {"capacity": cmd_capacity, "run": cmd_run, "chart": cmd_chart}[a.cmd](a)


if __name__ == "__main__":
    main()
