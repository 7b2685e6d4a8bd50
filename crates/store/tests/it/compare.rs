//! `compare`: two versions of one topology from synthetic traces. Versions
//! drawn from the same distributions get no mark; a slower LLM, a shifted
//! path mix and more guard failures are marked.

use std::sync::Arc;

use glassbox_store::compare::{self, CompareOptions, Comparison};
use glassbox_store::row::encode;
use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{RedactOptions, Redactor, TraceStore};

use crate::suite::T0;

/// A small deterministic generator (xorshift64*), so the samples and so the
/// test's outcome are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How one version behaves.
struct Shape {
    llm_ms: u64,
    retrieval_pct: u64,
    failed_pct: u64,
}

/// Writes 300 requests of `version` in one transaction.
fn fill(store: &mut dyn TraceStore, version: &str, shape: &Shape, rng: &mut Rng, base: u64) {
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let (mut rows, mut span_rows) = (Vec::new(), Vec::new());
    for i in 0..300u64 {
        let mut r = SynthRequest::new(base + i, T0 + (base + i) * 1000);
        r.version = version.into();
        // LLM time: the shape's mean ± 40%.
        let spread = shape.llm_ms * 4 / 10;
        r.llm_us = (shape.llm_ms - spread + rng.below(2 * spread + 1)) * 1000;
        r.retrieval = rng.below(100) < shape.retrieval_pct;
        r.failed = rng.below(100) < shape.failed_pct;
        let (record, spans) = build(&r);
        let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
        let (row, srows) = encode(&record, &spans, &red);
        rows.push(row);
        span_rows.extend(srows);
    }
    store.write(&rows, &span_rows).unwrap();
}

fn options() -> CompareOptions {
    CompareOptions {
        topology: "rag-chat".into(),
        a: "1.0.0".into(),
        b: "1.1.0".into(),
        filter: Default::default(),
        guard_kinds: vec!["output_guard".into()],
        alpha: compare::DEFAULT_ALPHA,
    }
}

fn run(store: &mut dyn TraceStore, a: &Shape, b: &Shape) -> Comparison {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    fill(store, "1.0.0", a, &mut rng, 1);
    fill(store, "1.1.0", b, &mut rng, 10_001);
    // A third version in the store is left out of the comparison.
    fill(
        store,
        "0.9.0",
        &Shape {
            llm_ms: 900,
            retrieval_pct: 0,
            failed_pct: 50,
        },
        &mut rng,
        20_001,
    );
    compare::compare(store, &options()).unwrap()
}

pub fn same_versions_get_no_mark(store: &mut dyn TraceStore) {
    let shape = || Shape {
        llm_ms: 200,
        retrieval_pct: 50,
        failed_pct: 3,
    };
    let c = run(store, &shape(), &shape());
    assert_eq!((c.requests.a, c.requests.b), (300, 300));
    assert!(!c.any_marked(), "no difference, yet marked: {c:#?}");
    // Everything was tested, not skipped.
    assert!(c.latency_ms.test.is_some() && c.cost.test.is_some() && c.path_test.is_some());
    assert!(c.rates.iter().any(|r| r.name == "guard_failure_rate"));
    assert!(c.nodes.iter().all(|n| n.latency_ms.test.is_some()));
}

pub fn real_differences_are_marked(store: &mut dyn TraceStore) {
    let c = run(
        store,
        &Shape {
            llm_ms: 200,
            retrieval_pct: 40,
            failed_pct: 1,
        },
        &Shape {
            llm_ms: 300,
            retrieval_pct: 80,
            failed_pct: 12,
        },
    );
    assert!(c.latency_ms.marked(), "{:?}", c.latency_ms);
    assert!(c.latency_ms.b.p.p50 > c.latency_ms.a.p.p50);
    assert!(c.cost.marked(), "retrieval costs more: {:?}", c.cost);
    assert!(c.path_test.unwrap().significant, "{:?}", c.path_test);
    let rate = |name: &str| c.rates.iter().find(|r| r.name == name).unwrap();
    assert!(rate("error_rate").marked(), "{:?}", rate("error_rate"));
    assert!(rate("guard_failure_rate").marked());
    assert!(
        !rate("fallback_rate").marked(),
        "no fallbacks on either side"
    );
    let node = |id: &str| c.nodes.iter().find(|n| n.node == id).unwrap();
    assert!(node("llm").latency_ms.marked());
    // The template's time did not change: no mark.
    assert!(!node("prompt").latency_ms.marked(), "{:?}", node("prompt"));
    // Paths on both sides, most frequent first.
    assert!(c.paths.len() >= 2);
    assert!(c.paths[0].a.hits + c.paths[0].b.hits >= c.paths[1].a.hits + c.paths[1].b.hits);
}
