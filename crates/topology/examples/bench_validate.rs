//! Benchmark: parse + validate a generated 500-node, 1,500-edge topology.
//!
//! `cargo run --release -p glassbox-topology --example bench_validate`
//!
//! Prints P50/P95/P99 over repeated runs, for the YAML and the JSON form and
//! for the seed's 6-node example. The node kind used here accepts any config,
//! so the figures are the cost of the format and graph checks themselves.

use std::fmt::Write;
use std::time::{Duration, Instant};

use glassbox_topology::{Checked, Cx, KindSchema, KindSet, Labels, Source, Value, validate};

struct AnyKind(&'static str);

impl KindSchema for AnyKind {
    fn name(&self) -> &'static str {
        self.0
    }
    fn summary(&self) -> &'static str {
        "benchmark kind"
    }
    fn check(&self, _config: Option<&Value>, _cx: &mut Cx<'_>) -> Checked {
        Checked {
            labels: Labels::Dynamic,
            config: None,
        }
    }
}

/// A layered DAG: `nodes` nodes in layers of 25, each node with 3 edges into
/// the next layer; every 5th edge carries a CEL condition, every 7th a label.
fn generate(nodes: usize, edges: usize, json: bool, conditions: bool) -> String {
    let layer = 25;
    let mut out = String::new();
    let mut node_list = Vec::new();
    let mut edge_list = Vec::new();
    for i in 0..nodes {
        node_list.push(format!(
            "{{\"id\": \"n{i}\", \"type\": \"{}\", \"resource\": {{\"type\": \"{}\", {}\"cost_per_call\": 0.0001}}, \"config\": {{\"k\": {i}}}}}",
            if i % 2 == 0 { "work" } else { "route" },
            if i % 3 == 0 { "gpu" } else { "cpu" },
            if i % 3 == 0 { "\"model\": \"m\", " } else { "" }
        ));
    }
    let mut count = 0;
    // Round-robin over the non-final layers until `edges` edges exist.
    'outer: for k in 0..layer {
        for i in 0..nodes - layer {
            if count == edges {
                break 'outer;
            }
            let next_layer = (i / layer + 1) * layer;
            let to = next_layer + (i + k * 7) % layer;
            let cond = if !conditions {
                String::new()
            } else if count % 5 == 0 {
                format!(", \"condition\": \"size(outputs.n{i}) > {k}\"")
            } else if count % 7 == 0 {
                format!(", \"condition\": \"label_{k}\"")
            } else {
                String::new()
            };
            edge_list.push(format!("{{\"from\": \"n{i}\", \"to\": \"n{to}\"{cond}}}"));
            count += 1;
        }
    }
    if json {
        let _ = write!(
            out,
            "{{\"topology_id\": \"bench\", \"version\": \"1\", \"nodes\": [\n{}\n], \"edges\": [\n{}\n]}}",
            node_list.join(",\n"),
            edge_list.join(",\n")
        );
    } else {
        out.push_str("topology_id: bench\nversion: '1'\nnodes:\n");
        for n in &node_list {
            let _ = writeln!(out, "  - {n}");
        }
        out.push_str("edges:\n");
        for e in &edge_list {
            let _ = writeln!(out, "  - {e}");
        }
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() -> std::process::ExitCode {
    let mut kinds = KindSet::new();
    kinds.register(std::sync::Arc::new(AnyKind("work")));
    kinds.register(std::sync::Arc::new(AnyKind("route")));
    for name in [
        "router",
        "embedding",
        "vector_search",
        "template",
        "llm_inference",
        "output_guard",
    ] {
        kinds.register(std::sync::Arc::new(AnyKind(name)));
    }
    let seed = include_str!("../../../examples/rag-chat-v3.json").to_string();
    let cases = [
        (
            "seed rag-chat-v3 (6 nodes, JSON)",
            Source::new("seed.json", seed),
        ),
        (
            "500 nodes / 1500 edges, YAML",
            Source::new("big.yaml", generate(500, 1500, false, true)),
        ),
        (
            "500 nodes / 1500 edges, JSON",
            Source::new("big.json", generate(500, 1500, true, true)),
        ),
        (
            "500 nodes / 1500 edges, JSON, no conditions",
            Source::new("plain.json", generate(500, 1500, true, false)),
        ),
    ];
    println!("| case | bytes | edges | runs | P50 | P95 | P99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, source) in cases {
        let (topology, diags) = validate(&source, &kinds);
        let Some(t) = topology else {
            eprintln!("{name}: invalid: {:?}", diags.first());
            return std::process::ExitCode::FAILURE;
        };
        let runs = 200;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            let (t, _) = validate(&source, &kinds);
            times.push(start.elapsed());
            assert!(t.is_some());
        }
        times.sort();
        println!(
            "| {name} | {} | {} | {runs} | {:.2} ms | {:.2} ms | {:.2} ms |",
            source.text().len(),
            t.edges.len(),
            percentile(&times, 0.50).as_secs_f64() * 1e3,
            percentile(&times, 0.95).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
        );
    }
    std::process::ExitCode::SUCCESS
}
