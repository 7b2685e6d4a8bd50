//! Engine throughput with the SQLite trace store on vs off.
//!
//! ```text
//! cargo run --release -p glassbox-store --example engine_store_bench [SECONDS]
//! ```
//!
//! Two workloads on the seed-shaped 6-node `rag6` topology, a 2-worker tokio
//! runtime:
//!
//! - `noop`: the engine's own overhead benchmark setup
//!   (`crates/engine/benches/overhead.rs`): nodes that return at once, 64
//!   requests in flight. The engine alone saturates both cores, so every
//!   microsecond the store spends is taken from it: the worst case.
//! - `latency`: the same nodes answering after the latencies a real
//!   deployment sees from its model servers (route 0.2 ms, embed 3 ms,
//!   retrieve 2 ms, prompt 0.1 ms, llm 40 ms, validate 0.2 ms; async waits,
//!   no CPU), 512 requests in flight: the serving case.
//!
//! Three sinks each: `NoopSink` (tracing off), `MemorySink::bounded` (what
//! the engine benchmark uses) and the SQLite `StoreWriter` (queue, batching,
//! redaction, commits). The store's rate counts the final flush: requests
//! are only done when on disk.

#![allow(clippy::unwrap_used)]

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use glassbox_engine::trace::{MemorySink, NoopSink, TraceSink};
use glassbox_engine::{
    BuildContext, BuildError, Call, Node, NodeCx, NodeOutput, Pipeline, PipelineOptions, Registry,
    RunOptions, TypedKind,
};
use glassbox_store::{StoreUrl, WriterOptions};
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
            delay: node
                .config
                .get("delay_us")
                .and_then(Value::as_u64)
                .map(Duration::from_micros),
        }))
    }
}

struct NoopNode {
    value: Value,
    label: Option<String>,
    /// Answer after this long (an async wait: a remote model's latency).
    delay: Option<Duration>,
}

impl Node for NoopNode {
    fn call(&self, _cx: NodeCx) -> Call {
        let mut out = NodeOutput::new(self.value.clone());
        out.label = self.label.clone();
        match self.delay {
            None => Call::Ready(Ok(out)),
            Some(d) => Call::future(async move {
                tokio::time::sleep(d).await;
                Ok(out)
            }),
        }
    }
}

const RAG6: &str = r#"
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
"#;

/// `RAG6` with each node answering after a model server's typical latency.
const RAG6_LATENCY: &str = r#"
topology_id: rag6
version: "1"
nodes:
  - { id: route, type: noop, resource: { type: cpu, cost_per_call: 0.0002 }, config: { label: need_retrieval, delay_us: 200 } }
  - { id: embed, type: noop, resource: { type: gpu, model: embed-v2, cost_per_call: 0.001 }, config: { delay_us: 3000 } }
  - { id: retrieve, type: noop, resource: { type: cpu, cost_per_call: 0.0005 }, config: { value: { hits: 3 }, delay_us: 2000 } }
  - { id: prompt, type: noop, resource: { type: cpu, cost_per_call: 0.0001 }, config: { value: prompt, delay_us: 100 } }
  - { id: llm, type: noop, resource: { type: gpu, model: chat-7b, cost_per_call: 0.02 }, config: { value: answer, delay_us: 40000 } }
  - { id: validate, type: noop, resource: { type: cpu, cost_per_call: 0.0003 }, config: { value: answer, delay_us: 200 } }
edges:
  - { from: route, to: embed, condition: need_retrieval }
  - { from: route, to: prompt, condition: direct_answer }
  - { from: embed, to: retrieve }
  - { from: retrieve, to: prompt }
  - { from: prompt, to: llm }
  - { from: llm, to: validate }
"#;

fn pipeline(sink: Arc<dyn TraceSink>, text: &str) -> Pipeline {
    let mut registry = Registry::new();
    registry.add(Noop);
    let v = glassbox_topology::load_source(Source::new("rag6.yaml", text), &registry.kind_set())
        .unwrap_or_else(|e| panic!("{e}"));
    let topology = Arc::new(v.topology);
    let options = PipelineOptions {
        sink,
        ..PipelineOptions::default()
    };
    let cx = BuildContext::new(topology.clone());
    Pipeline::build(topology, &registry, &cx, options).unwrap_or_else(|e| panic!("{e}"))
}

/// Requests completed in `duration` with `in_flight` requests on 2 workers.
fn run(p: &Pipeline, duration: Duration, in_flight: usize) -> u64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let input = json!({ "question": "what is the price of plan 3?" });
    rt.block_on(async {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..in_flight {
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
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap_or(0);
        }
        total
    })
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let d = Duration::from_secs_f64(secs);
    let workloads: [(&str, &str, usize); 2] = [("noop", RAG6, 64), ("latency", RAG6_LATENCY, 512)];
    let mut rows = Vec::new();
    for (workload, text, in_flight) in workloads {
        // Alternate so drift in machine load hits every variant alike.
        for round in 0..2 {
            let off = pipeline(Arc::new(NoopSink), text);
            let t = Instant::now();
            let n = run(&off, d, in_flight);
            rows.push((
                workload,
                "tracing off (NoopSink)",
                round,
                n as f64 / t.elapsed().as_secs_f64(),
            ));

            let mem = pipeline(Arc::new(MemorySink::bounded(10_000)), text);
            let t = Instant::now();
            let n = run(&mem, d, in_flight);
            rows.push((
                workload,
                "in-memory sink (bounded)",
                round,
                n as f64 / t.elapsed().as_secs_f64(),
            ));

            let dir = tempfile::tempdir().unwrap();
            let writer = Arc::new(
                // The product's path: what `glassbox run` and `serve` open.
                glassbox_store::open_with(
                    &StoreUrl::Sqlite(dir.path().join("t.db")),
                    WriterOptions::default(),
                )
                .unwrap(),
            );
            let store = pipeline(writer.clone(), text);
            let t = Instant::now();
            let n = run(&store, d, in_flight);
            let ran = t.elapsed().as_secs_f64();
            writer.flush().unwrap();
            let total = t.elapsed().as_secs_f64();
            let stats = writer.stats();
            assert_eq!(stats.requests_written, n);
            rows.push((
                workload,
                "SQLite store (incl. final flush)",
                round,
                n as f64 / total,
            ));
            eprintln!(
                "{workload} round {round}: store ran {ran:.2} s + flush {:.2} s; {} requests, {} spans; max queue {}, waits {}",
                total - ran,
                stats.requests_written,
                stats.spans_written,
                stats.max_queue_depth,
                stats.backpressure_waits
            );
        }
    }
    println!("| workload | sink | round | req/s |");
    println!("|---|---|---:|---:|");
    for (workload, name, round, rate) in &rows {
        println!("| {workload} | {name} | {round} | {rate:.0} |");
    }
    for workload in ["noop", "latency"] {
        let best = |sink: &str| {
            rows.iter()
                .filter(|r| r.0 == workload && r.1.starts_with(sink))
                .map(|r| r.3)
                .fold(0.0_f64, f64::max)
        };
        let (off, store) = (best("tracing off"), best("SQLite"));
        println!(
            "{workload}: SQLite store {:.1}% {} tracing off (best of rounds)",
            ((store - off) / off * 100.0).abs(),
            if store < off { "below" } else { "above" }
        );
    }
}
