#!/usr/bin/env python3
"""Streaming load client for scripts/bench-serving.sh (docs/BENCHMARKS.md, "Serving").

Drives one or more OpenAI-compatible servers with the same streamed chat
completions, closed loop, at each concurrency in turn, and reports per server
and level: aggregate output tok/s, TTFT and TPOT P50/P99, end-to-end latency,
errors. Standard library only (asyncio streams, hand-written HTTP/1.1), so
both servers see exactly the same client.

    bench_serving.py --target glassbox=http://127.0.0.1:8080=serving-bench \
                     --target llama-server=http://127.0.0.1:8081=smollm2 \
                     --prompts examples/rag-chat/questions.txt --system "..." \
                     --concurrency 1,4,8,16 --requests 32 --max-tokens 128 \
                     --json out.json

Per request: TTFT is the time from sending to the first chunk carrying
non-empty content; TPOT is (last content chunk - first) / (tokens - 1);
tokens are the `usage.completion_tokens` of the final chunk
(`stream_options.include_usage`), else the number of content chunks. A level
runs `--requests` requests through `C` workers taking prompts in order from
the same list for every server; its tok/s is the tokens of its successful
requests over the time from its first send to its last answer. Before the
first level each server gets `--warmup` requests one at a time and one pass
at the highest concurrency, and right before each level `--level-warmup`
rounds of C requests, none of them measured. Servers take
turns level by level (the first server of a level alternates), so a change
of machine load hits both alike. Exit 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit


@dataclass
class Target:
    name: str
    host: str
    port: int
    model: str


@dataclass
class Result:
    prompt_index: int
    ok: bool = False
    error: str = ""
    timeout: bool = False
    start: float = 0.0
    end: float = 0.0
    ttft_s: float | None = None
    tpot_s: float | None = None
    completion_tokens: int = 0
    prompt_tokens: int | None = None
    content_chunks: int = 0
    usage_reported: bool = False
    text: str = ""


@dataclass
class Level:
    target: str
    concurrency: int
    requests: int
    ok: int
    errors: int
    timeouts: int
    duration_s: float
    output_tokens: int
    tok_s: float
    req_s: float
    ttft_ms: dict = field(default_factory=dict)
    tpot_ms: dict = field(default_factory=dict)
    e2e_ms: dict = field(default_factory=dict)
    mean_completion_tokens: float = 0.0
    mean_prompt_tokens: float | None = None
    usage_reported: int = 0
    error_samples: list = field(default_factory=list)


def parse_target(spec: str) -> Target:
    try:
        name, url, model = spec.split("=", 2)
    except ValueError:
        raise SystemExit(f"--target wants NAME=URL=MODEL, got {spec!r}")
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise SystemExit(f"--target {name}: only http://HOST:PORT URLs, got {url!r}")
    return Target(name, parts.hostname, parts.port or 80, model)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of `values` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(values: list[float]) -> dict:
    ms = [v * 1000.0 for v in values]
    return {
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "mean": (sum(ms) / len(ms)) if ms else None,
        "n": len(ms),
    }


async def read_headers(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed before the status line")
    parts = status_line.decode("latin-1").split(" ", 2)
    status = int(parts[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    return status, headers


async def body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]):
    """Yields the response body as it arrives (chunked, sized or until EOF)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                return
            data = await reader.readexactly(size)
            await reader.readline()  # the CRLF after the chunk
            yield data
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining > 0:
            data = await reader.read(min(remaining, 65536))
            if not data:
                return
            remaining -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


async def one_request(target: Target, body: bytes, result: Result) -> None:
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\n"
            f"Host: {target.host}:{target.port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        result.start = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        status, headers = await read_headers(reader)
        if status != 200:
            raw = b"".join([c async for c in body_chunks(reader, headers)])
            result.error = f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}"
            return
        first = last = None
        pending = b""
        done = False
        pieces: list[str] = []
        async for chunk in body_chunks(reader, headers):
            now = time.perf_counter()
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    done = True
                    continue
                event = json.loads(payload)
                if "error" in event:
                    result.error = f"stream error: {json.dumps(event['error'])[:300]}"
                    return
                for choice in event.get("choices") or []:
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        if first is None:
                            first = now
                        last = now
                        result.content_chunks += 1
                        pieces.append(content)
                usage = event.get("usage")
                if usage:
                    result.usage_reported = True
                    result.completion_tokens = int(usage.get("completion_tokens") or 0)
                    result.prompt_tokens = usage.get("prompt_tokens")
        result.end = time.perf_counter()
        if not done:
            result.error = "stream ended without [DONE]"
            return
        if not result.usage_reported:
            result.completion_tokens = result.content_chunks
        result.text = "".join(pieces)
        if first is not None:
            result.ttft_s = first - result.start
            if result.completion_tokens > 1 and last is not None:
                result.tpot_s = (last - first) / (result.completion_tokens - 1)
        result.ok = True
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


def request_body(args, target: Target, prompt: str, index: int) -> bytes:
    per_target = args.target_messages.get(target.name)
    if per_target is not None:
        messages = per_target[index % len(per_target)]
    else:
        messages = []
        if args.system:
            messages.append({"role": "system", "content": args.system})
        messages.append({"role": "user", "content": prompt})
    return json.dumps(
        {
            "model": target.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "seed": 42,
        }
    ).encode()


async def timed_request(args, target: Target, index: int, prompt: str) -> Result:
    result = Result(prompt_index=index)
    try:
        await asyncio.wait_for(
            one_request(target, request_body(args, target, prompt, index), result), args.timeout
        )
    except asyncio.TimeoutError:
        result.ok = False
        result.timeout = True
        result.error = f"timeout after {args.timeout}s"
    except (OSError, ValueError, asyncio.IncompleteReadError) as e:
        result.ok = False
        result.error = f"{type(e).__name__}: {e}"
    if not result.end:
        result.end = time.perf_counter()
    return result


async def run_level(
    args, target: Target, prompts: list[str], concurrency: int, requests: int | None = None
) -> tuple[Level, list[Result]]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(args.requests if requests is None else requests):
        queue.put_nowait(i)
    results: list[Result] = []

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            results.append(await timed_request(args, target, i, prompts[i % len(prompts)]))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    ended = time.perf_counter()
    ok = [r for r in results if r.ok]
    first_send = min((r.start for r in results if r.start), default=began)
    last_answer = max((r.end for r in results), default=ended)
    duration = max(last_answer - first_send, 1e-9)
    tokens = sum(r.completion_tokens for r in ok)
    prompt_tokens = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    level = Level(
        target=target.name,
        concurrency=concurrency,
        requests=len(results),
        ok=len(ok),
        errors=len(results) - len(ok),
        timeouts=sum(1 for r in results if r.timeout),
        duration_s=duration,
        output_tokens=tokens,
        tok_s=tokens / duration,
        req_s=len(ok) / duration,
        ttft_ms=summary_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_ms=summary_ms([r.tpot_s for r in ok if r.tpot_s is not None]),
        e2e_ms=summary_ms([r.end - r.start for r in ok]),
        mean_completion_tokens=(tokens / len(ok)) if ok else 0.0,
        mean_prompt_tokens=(sum(prompt_tokens) / len(prompt_tokens)) if prompt_tokens else None,
        usage_reported=sum(1 for r in ok if r.usage_reported),
        error_samples=sorted({r.error for r in results if not r.ok})[:5],
    )
    return level, results


def requests_table(levels: list[Level], names: list[str], results) -> str:
    """One row per server and level: req/s, TTFT and E2E P50/P95/P99, and how
    many prompts got the same text from the first two servers at that level."""
    out = [
        "| clients | server | req/s | TTFT P50 / P95 / P99 s | E2E P50 / P95 / P99 s | prompt tokens | tokens/request | same text | errors |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    s = lambda v: fmt(None if v is None else v / 1000.0, 2)
    for lv in sorted(levels, key=lambda lv: (lv.concurrency, names.index(lv.target))):
        agree = same_text(results, names, lv.concurrency)
        out.append(
            f"| {lv.concurrency} | {lv.target} | {fmt(lv.req_s, 3)} "
            f"| {s(lv.ttft_ms['p50'])} / {s(lv.ttft_ms['p95'])} / {s(lv.ttft_ms['p99'])} "
            f"| {s(lv.e2e_ms['p50'])} / {s(lv.e2e_ms['p95'])} / {s(lv.e2e_ms['p99'])} "
            f"| {fmt(lv.mean_prompt_tokens, 0)} | {fmt(lv.mean_completion_tokens)} "
            f"| {agree.get('equal', '–')} / {agree.get('compared', '–')} | {lv.errors} |"
        )
    return "\n".join(out)


def fmt(value, digits=1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown(levels: list[Level], names: list[str]) -> str:
    by = {(lv.target, lv.concurrency): lv for lv in levels}
    concurrencies = sorted({lv.concurrency for lv in levels})
    out = []
    if len(names) == 2:
        a, b = names
        out.append(
            f"| streams | {a} tok/s | {b} tok/s | ratio | TTFT P50 / P99 ms, {a} | {b} "
            f"| TPOT P50 / P99 ms, {a} | {b} | tokens/request, {a} | {b} | errors |"
        )
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in concurrencies:
            x, y = by.get((a, c)), by.get((b, c))
            if x is None or y is None:
                continue
            ratio = (x.tok_s / y.tok_s) if y.tok_s else None
            out.append(
                f"| {c} | {fmt(x.tok_s)} | {fmt(y.tok_s)} | {fmt(ratio, 2)}× "
                f"| {fmt(x.ttft_ms['p50'], 0)} / {fmt(x.ttft_ms['p99'], 0)} "
                f"| {fmt(y.ttft_ms['p50'], 0)} / {fmt(y.ttft_ms['p99'], 0)} "
                f"| {fmt(x.tpot_ms['p50'])} / {fmt(x.tpot_ms['p99'])} "
                f"| {fmt(y.tpot_ms['p50'])} / {fmt(y.tpot_ms['p99'])} "
                f"| {fmt(x.mean_completion_tokens)} | {fmt(y.mean_completion_tokens)} "
                f"| {x.errors + y.errors} |"
            )
    else:
        out.append("| server | streams | tok/s | TTFT P50 / P99 ms | TPOT P50 / P99 ms | tokens/request | errors |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for lv in levels:
            out.append(
                f"| {lv.target} | {lv.concurrency} | {fmt(lv.tok_s)} "
                f"| {fmt(lv.ttft_ms['p50'], 0)} / {fmt(lv.ttft_ms['p99'], 0)} "
                f"| {fmt(lv.tpot_ms['p50'])} / {fmt(lv.tpot_ms['p99'])} "
                f"| {fmt(lv.mean_completion_tokens)} | {lv.errors} |"
            )
    return "\n".join(out)


def same_text(
    results: dict[tuple[str, int], list[Result]], names: list[str], concurrency: int = 1
) -> dict:
    """How many prompts got the same greedy text from the first two servers at `concurrency`."""
    if len(names) < 2:
        return {}
    texts = []
    for name in names[:2]:
        by_prompt = {}
        for r in results.get((name, concurrency), []):
            if r.ok:
                by_prompt.setdefault(r.prompt_index, r.text)
        texts.append(by_prompt)
    common = sorted(set(texts[0]) & set(texts[1]))
    equal = sum(1 for i in common if texts[0][i] == texts[1][i])
    return {"compared": len(common), "equal": equal}


async def main_async(args) -> int:
    targets = [parse_target(t) for t in args.target]
    names = [t.name for t in targets]
    with open(args.prompts, encoding="utf-8") as f:
        prompts = [line.strip() for line in f if line.strip()]
    if not prompts:
        raise SystemExit(f"{args.prompts}: no prompts")
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    args.target_messages = {}
    for spec in args.messages or []:
        name, _, path = spec.partition("=")
        if name not in names or not path:
            raise SystemExit(f"--messages wants NAME=FILE with NAME one of {names}, got {spec!r}")
        with open(path, encoding="utf-8") as f:
            chats = [json.loads(line) for line in f if line.strip()]
        if len(chats) != len(prompts):
            raise SystemExit(f"--messages {name}: {len(chats)} chats for {len(prompts)} prompts")
        args.target_messages[name] = chats

    # Warm-up, not measured: a few requests one at a time, then one pass at
    # the highest concurrency. A server's first batches at a new width are
    # slow (buffers sized and touched, pages faulted in); without the wide
    # pass the first level measured paid for that.
    widest = max(concurrencies)
    for t in targets:
        for i in range(args.warmup):
            r = await timed_request(args, t, i, prompts[i % len(prompts)])
            if not r.ok:
                print(f"warm-up request to {t.name} failed: {r.error}", file=sys.stderr)
                return 1
        if args.warmup > 0:
            wide, _ = await run_level(args, t, prompts, widest, requests=widest)
            if wide.errors:
                print(f"warm-up pass on {t.name} failed: {wide.error_samples}", file=sys.stderr)
                return 1

    levels: list[Level] = []
    all_results: dict[tuple[str, int], list[Result]] = {}
    for n, c in enumerate(concurrencies):
        order = targets if n % 2 == 0 else list(reversed(targets))
        for t in order:
            if args.level_warmup:
                # One unmeasured round at this width first: the first requests
                # a server gets after the other one ran are slower.
                await run_level(args, t, prompts, c, requests=c * args.level_warmup)
            level, results = await run_level(args, t, prompts, c)
            levels.append(level)
            all_results[(t.name, c)] = results
            print(
                f"  {t.name:<14} streams {c:>3}: {level.tok_s:8.1f} tok/s, "
                f"TTFT P50 {fmt(level.ttft_ms['p50'], 0)} ms, "
                f"TPOT P50 {fmt(level.tpot_ms['p50'])} ms, "
                f"{level.ok}/{level.requests} ok in {level.duration_s:.1f} s"
                + (f"  errors: {level.error_samples}" if level.errors else ""),
                file=sys.stderr,
                flush=True,
            )

    table = requests_table(levels, names, all_results) if args.table == "requests" else markdown(levels, names)
    print(table)
    check = same_text(all_results, names, min(concurrencies))
    if check:
        print(
            f"\nsame greedy text at 1 stream: {check['equal']} of {check['compared']} prompts"
        )
    if args.json:
        doc = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpus": _cpus(), "platform": platform.platform()},
            "settings": {
                "concurrency": concurrencies,
                "requests_per_level": args.requests,
                "max_tokens": args.max_tokens,
                "prompts": args.prompts,
                "system": args.system,
                "warmup": args.warmup,
                "targets": [asdict(t) for t in targets],
                "extra": json.loads(args.meta) if args.meta else None,
            },
            "levels": [asdict(lv) for lv in levels],
            "same_text_at_1_stream": check,
            "same_text_by_level": {
                str(c): same_text(all_results, names, c) for c in concurrencies
            },
            "requests": {
                f"{name}@{c}": [
                    {k: v for k, v in asdict(r).items() if k != "text"} for r in results
                ]
                for (name, c), results in all_results.items()
            },
            "table": table,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    return 1 if any(lv.errors for lv in levels) else 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", action="append", required=True, help="NAME=http://HOST:PORT=MODEL (repeatable)")
    p.add_argument("--prompts", required=True, help="file, one prompt per line")
    p.add_argument("--system", default="", help="system message sent with every request")
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--requests", type=int, default=32, help="requests per server and level")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="unmeasured requests per server first, one at a time, then one pass at the "
        "highest concurrency (0: no warm-up at all)",
    )
    p.add_argument(
        "--level-warmup",
        type=int,
        default=1,
        help="unmeasured rounds (C requests each) per server right before each level",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument(
        "--messages",
        action="append",
        help="NAME=FILE: the chat messages for target NAME, one JSON array per line, "
        "line i for prompt i (instead of --system and the prompt); repeatable",
    )
    p.add_argument(
        "--table",
        choices=["tokens", "requests"],
        default="tokens",
        help="tokens: tok/s, TTFT and TPOT side by side; requests: req/s, TTFT and E2E per server",
    )
    p.add_argument("--json", help="write the results here")
    p.add_argument("--meta", help="JSON object stored under settings.extra")
    args = p.parse_args()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
