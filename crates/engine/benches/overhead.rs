//! Engine overhead with trivial nodes (`scripts/bench-engine.sh` runs it).
//!
//! Two topologies: `rag6`, shaped like the seed's rag-chat-v3 (a router
//! whose label sends the request down the retrieval branch, so all six
//! nodes run), and `fan50` (one entry, 48 parallel nodes, one join).
//! Tracing to a bounded in-memory sink is on, with summaries.
//!
//! Two measurements per topology:
//! - latency: one request at a time on a current-thread runtime; per-node
//!   overhead = mean latency / nodes run (what the Python peers are
//!   measured by, one request at a time on one thread);
//! - throughput: a multi-thread runtime with one worker per core and
//!   64 requests in flight.
//!
//! Prints one JSON object per topology on stdout.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use glassbox_engine::trace::MemorySink;
use glassbox_engine::{
    BuildContext, BuildError, Call, Node, NodeCx, NodeOutput, Pipeline, PipelineOptions, Registry,
    RunOptions, TypedKind,
};
use glassbox_topology::{Cx, Labels, Source, Value as Spanned};
use serde_json::{Value, json};

struct Noop;

impl TypedKind for Noop {
    type Config = ();

    fn name(&self) -> &'static str {
        "noop"
    }
    fn summary(&self) -> &'static str {
        "returns its config `value` and emits its config `label`"
    }
    fn check(&self, _config: Option<&Spanned>, _cx: &mut Cx<'_>) {}
    fn labels(&self, _config: &()) -> Labels {
        Labels::Dynamic
    }

    fn build(
        &self,
        _config: &(),
        node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Ok(Arc::new(NoopNode {
            value: node.config.get("value").cloned().unwrap_or(Value::Null),
            label: node
                .config
                .get("label")
                .and_then(Value::as_str)
                .map(str::to_string),
        }))
    }
}

struct NoopNode {
    value: Value,
    label: Option<String>,
}

impl Node for NoopNode {
    fn call(&self, _cx: NodeCx) -> Call {
        let mut out = NodeOutput::new(self.value.clone());
        out.label = self.label.clone();
        Call::Ready(Ok(out))
    }
}

fn rag6() -> String {
    r#"
topology_id: rag6
version: "1"
nodes:
  - { id: route, type: noop, resource: { type: cpu, cost_per_call: 0.0002 }, config: { label: need_retrieval } }
  - { id: embed, type: noop, resource: { type: gpu, model: embed-v2, cost_per_call: 0.001 } }
  - { id: retrieve, type: noop, resource: { type: cpu, cost_per_call: 0.0005 }, config: { value: { hits: 3 } } }
  - { id: prompt, type: noop, resource: { type: cpu, cost_per_call: 0.0001 }, config: { value: prompt } }
  - { id: llm, type: noop, resource: { type: gpu, model: chat-7b, cost_per_call: 0.02 }, config: { value: answer } }
  - { id: validate, type: noop, resource: { type: cpu, cost_per_call: 0.0003 }, config: { value: answer } }
edges:
  - { from: route, to: embed, condition: need_retrieval }
  - { from: route, to: prompt, condition: direct_answer }
  - { from: embed, to: retrieve }
  - { from: retrieve, to: prompt }
  - { from: prompt, to: llm }
  - { from: llm, to: validate }
"#
    .to_string()
}

fn fan50() -> String {
    let mut s =
        String::from("topology_id: fan50\nversion: \"1\"\nnodes:\n  - { id: src, type: noop }\n");
    for i in 0..48 {
        s.push_str(&format!(
            "  - {{ id: n{i}, type: noop, config: {{ value: {i} }} }}\n"
        ));
    }
    s.push_str("  - { id: join, type: noop, config: { value: done } }\nedges:\n");
    for i in 0..48 {
        s.push_str(&format!(
            "  - {{ from: src, to: n{i} }}\n  - {{ from: n{i}, to: join }}\n"
        ));
    }
    s
}

fn pipeline(yaml: &str) -> Pipeline {
    let mut registry = Registry::new();
    registry.add(Noop);
    let v =
        match glassbox_topology::load_source(Source::new("bench.yaml", yaml), &registry.kind_set())
        {
            Ok(v) => v,
            Err(glassbox_topology::TopologyError::Invalid(r)) => panic!("{}", r.render(false)),
            Err(e) => panic!("{e}"),
        };
    let topology = Arc::new(v.topology);
    let sink = Arc::new(MemorySink::bounded(10_000));
    let options = PipelineOptions {
        sink,
        ..PipelineOptions::default()
    };
    let cx = BuildContext::new(topology.clone());
    match Pipeline::build(topology, &registry, &cx, options) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] as f64 / 1000.0
}

/// One request at a time on one thread: latencies in nanoseconds.
fn latency(p: &Pipeline, input: &Value, duration: Duration) -> Vec<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let mut lat = Vec::new();
        let start = Instant::now();
        while start.elapsed() < duration {
            let t = Instant::now();
            let out = p.run(input.clone(), RunOptions::default()).await;
            lat.push(t.elapsed().as_nanos() as u64);
            assert!(out.result.is_ok());
        }
        lat
    })
}

/// Requests per second with `inflight` concurrent requests on `workers` threads.
fn throughput(
    p: &Pipeline,
    input: &Value,
    workers: usize,
    inflight: usize,
    duration: Duration,
) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..inflight {
            let p = p.clone();
            let input = input.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < duration {
                    let out = p.run(input.clone(), RunOptions::default()).await;
                    assert!(out.result.is_ok());
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0u64;
        for t in tasks {
            total += t.await.unwrap_or(0);
        }
        total as f64 / start.elapsed().as_secs_f64()
    })
}

fn main() {
    let secs: f64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let duration = Duration::from_secs_f64(secs);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let input = json!({"question": "What does the Pro plan cost?"});
    for (name, yaml, nodes) in [("rag6", rag6(), 6usize), ("fan50", fan50(), 50usize)] {
        let p = pipeline(&yaml);
        // Warm up allocator and caches.
        let _ = latency(&p, &input, Duration::from_millis(300));
        let mut lat = latency(&p, &input, duration);
        lat.sort_unstable();
        let mean_us = lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1000.0;
        let rps = throughput(&p, &input, workers, 64, duration);
        println!(
            "{}",
            json!({
                "framework": "glassbox",
                "topology": name,
                "nodes": nodes,
                "requests": lat.len(),
                "mean_us": mean_us,
                "p50_us": percentile(&lat, 0.50),
                "p95_us": percentile(&lat, 0.95),
                "p99_us": percentile(&lat, 0.99),
                "us_per_node": mean_us / nodes as f64,
                "seq_rps": 1e6 / mean_us,
                "rps": rps,
                "workers": workers,
            })
        );
    }
}
