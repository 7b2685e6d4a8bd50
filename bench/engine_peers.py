"""Engine overhead of the Python peers on the same two topologies.

The Glassbox benchmark (crates/engine/benches/overhead.rs) runs trivial
nodes through `rag6` (the seed's rag-chat-v3 shape, routed down the
retrieval branch so all six nodes run) and `fan50` (one entry, 48 parallel
nodes, one join). This script builds the same graphs in LangGraph and in
Haystack 2 with equally trivial nodes and measures one request at a time,
which is how both frameworks are normally invoked (and the GIL would
serialise threads anyway). Prints one JSON object per line.

Run through scripts/bench-engine.sh, which installs the peers into
.venv-bench.
"""

import argparse
import json
import operator
import statistics
import time
from importlib.metadata import version
from typing import Annotated, TypedDict

QUESTION = "What does the Pro plan cost?"


def measure(name, framework, nodes, invoke, secs):
    """Calls `invoke` one at a time for `secs` seconds after a warm-up."""
    warm_end = time.perf_counter() + min(1.0, secs / 3)
    while time.perf_counter() < warm_end:
        invoke()
    lat = []
    end = time.perf_counter() + secs
    while time.perf_counter() < end:
        t = time.perf_counter_ns()
        invoke()
        lat.append(time.perf_counter_ns() - t)
    lat.sort()

    def pct(p):
        return lat[round((len(lat) - 1) * p)] / 1000.0

    mean_us = statistics.fmean(lat) / 1000.0
    return {
        "framework": framework,
        "topology": name,
        "nodes": nodes,
        "requests": len(lat),
        "mean_us": mean_us,
        "p50_us": pct(0.50),
        "p95_us": pct(0.95),
        "p99_us": pct(0.99),
        "us_per_node": mean_us / nodes,
        "seq_rps": 1e6 / mean_us,
    }


# ---------------------------------------------------------------- LangGraph

def langgraph_rag6():
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict, total=False):
        question: str
        label: str
        hits: int
        prompt: str
        answer: str

    g = StateGraph(S)
    g.add_node("route", lambda s: {"label": "need_retrieval"})
    g.add_node("embed", lambda s: {})
    g.add_node("retrieve", lambda s: {"hits": 3})
    g.add_node("prompt", lambda s: {"prompt": "prompt"})
    g.add_node("llm", lambda s: {"answer": "answer"})
    g.add_node("validate", lambda s: {"answer": "answer"})
    g.add_edge(START, "route")
    g.add_conditional_edges(
        "route", lambda s: s["label"], {"need_retrieval": "embed", "direct_answer": "prompt"}
    )
    g.add_edge("embed", "retrieve")
    g.add_edge("retrieve", "prompt")
    g.add_edge("prompt", "llm")
    g.add_edge("llm", "validate")
    g.add_edge("validate", END)
    app = g.compile()
    return lambda: app.invoke({"question": QUESTION})


def langgraph_fan50():
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict, total=False):
        question: str
        results: Annotated[list, operator.add]
        done: str

    g = StateGraph(S)
    g.add_node("src", lambda s: {})
    names = [f"n{i}" for i in range(48)]
    for i, n in enumerate(names):
        g.add_node(n, lambda s, i=i: {"results": [i]})
        g.add_edge("src", n)
    g.add_node("join", lambda s: {"done": "done"})
    g.add_edge(names, "join")
    g.add_edge(START, "src")
    g.add_edge("join", END)
    app = g.compile()
    return lambda: app.invoke({"question": QUESTION})


# ----------------------------------------------------------------- Haystack

def haystack_components():
    from haystack import component
    from haystack.core.component.types import Variadic

    @component
    class Route:
        @component.output_types(need_retrieval=str, direct_answer=str)
        def run(self, question: str):
            return {"need_retrieval": question}

    @component
    class Step:
        @component.output_types(out=str)
        def run(self, value: str):
            return {"out": value}

    @component
    class Join:
        @component.output_types(out=str)
        def run(self, value: Variadic[str]):
            return {"out": "done"}

    return Route, Step, Join


def haystack_rag6():
    from haystack import Pipeline

    Route, Step, Join = haystack_components()
    p = Pipeline()
    p.add_component("route", Route())
    for n in ["embed", "retrieve", "llm", "validate"]:
        p.add_component(n, Step())
    p.add_component("prompt", Join())
    p.connect("route.need_retrieval", "embed.value")
    p.connect("route.direct_answer", "prompt.value")
    p.connect("embed.out", "retrieve.value")
    p.connect("retrieve.out", "prompt.value")
    p.connect("prompt.out", "llm.value")
    p.connect("llm.out", "validate.value")
    return lambda: p.run({"route": {"question": QUESTION}})


def haystack_fan50():
    from haystack import Pipeline

    _Route, Step, Join = haystack_components()
    p = Pipeline()
    p.add_component("src", Step())
    p.add_component("join", Join())
    for i in range(48):
        p.add_component(f"n{i}", Step())
        p.connect("src.out", f"n{i}.value")
        p.connect(f"n{i}.out", "join.value")
    return lambda: p.run({"src": {"value": QUESTION}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=5.0)
    args = ap.parse_args()
    cases = [
        ("langgraph", version("langgraph"), "rag6", 6, langgraph_rag6),
        ("langgraph", version("langgraph"), "fan50", 50, langgraph_fan50),
        ("haystack", version("haystack-ai"), "rag6", 6, haystack_rag6),
        ("haystack", version("haystack-ai"), "fan50", 50, haystack_fan50),
    ]
    for framework, ver, name, nodes, build in cases:
        invoke = build()
        row = measure(name, framework, nodes, invoke, args.secs)
        row["version"] = ver
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
