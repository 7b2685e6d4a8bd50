//! Drift alerts on synthetic traffic: noisy traffic with no drift fires
//! nothing; a route shift, a slower node and dearer requests each fire,
//! with their evidence; too few samples fire nothing.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::*;
use crate::row::encode;
use crate::stats::erfc;
use crate::synth::{SynthRequest, build};
use crate::{RedactOptions, Redactor, SqliteStore};

const HOUR: u64 = 3_600_000_000;
/// 2026-11-30 00:00:00 UTC.
const T0: u64 = 1_795_996_800_000_000;
const NOW: u64 = T0 + 25 * HOUR;

/// How one window's traffic behaves.
#[derive(Clone, Copy)]
struct Traffic {
    retrieval_share: f64,
    llm_ms: (u64, u64),
    tokens: (u64, u64),
}

const NORMAL: Traffic = Traffic {
    retrieval_share: 0.75,
    llm_ms: (150, 260),
    tokens: (80, 180),
};

/// `n` requests spread over `[from, from + span)`, with seeded noise.
fn write(
    store: &mut SqliteStore,
    rng: &mut fastrand::Rng,
    seed: u64,
    n: u64,
    from: u64,
    span: u64,
    t: Traffic,
) {
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let (mut reqs, mut all_spans) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut r = SynthRequest::new(seed + i, from + span / n * i);
        r.retrieval = rng.f64() < t.retrieval_share;
        r.llm_us = rng.u64(t.llm_ms.0..t.llm_ms.1) * 1000;
        r.output_tokens = rng.u64(t.tokens.0..t.tokens.1);
        let (record, spans) = build(&r);
        let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
        let (row, rows) = encode(&record, &spans, &red);
        reqs.push(row);
        all_spans.extend(rows);
    }
    // One transaction per window keeps the test fast.
    store.write(&reqs, &all_spans).unwrap();
}

/// A store with 400 baseline requests over 24 h and `current_n` in the last hour.
fn store(seed: u64, current: Traffic, current_n: u64) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    write(&mut store, &mut rng, 1_000, 400, T0, 24 * HOUR, NORMAL);
    write(
        &mut store,
        &mut rng,
        5_000,
        current_n,
        T0 + 24 * HOUR,
        HOUR,
        current,
    );
    (dir, store)
}

fn options() -> DriftOptions {
    DriftOptions {
        topology: None,
        now_us: NOW,
        window_us: HOUR,
        baseline_us: 24 * HOUR,
        thresholds: Thresholds::default(),
    }
}

#[test]
fn noisy_traffic_without_drift_fires_nothing() {
    // Several seeds: the guards must hold for noise, not for one lucky draw.
    for seed in 1..=5 {
        let (_dir, mut s) = store(seed, NORMAL, 150);
        let ev = evaluate(&mut s, &options()).unwrap();
        assert_eq!((ev.baseline_requests, ev.current_requests), (400, 150));
        assert!(ev.alerts.is_empty(), "seed {seed}: {:#?}", ev.alerts);
    }
}

#[test]
fn a_route_shift_fires_with_its_evidence() {
    // Product questions suddenly answered directly: retrieval 75% → 20%.
    let drift = Traffic {
        retrieval_share: 0.2,
        ..NORMAL
    };
    let (_dir, mut s) = store(3, drift, 150);
    let ev = evaluate(&mut s, &options()).unwrap();
    let routes: Vec<&Alert> = ev
        .alerts
        .iter()
        .filter(|a| a.kind == AlertKind::RouteShift)
        .collect();
    assert_eq!(routes.len(), 2, "{:#?}", ev.alerts);
    let direct = routes
        .iter()
        .find(|a| !a.node.contains("retrieve"))
        .unwrap();
    assert_eq!(
        (direct.baseline.samples, direct.current.samples),
        (400, 150)
    );
    assert!(
        direct.baseline.value < 0.35 && direct.current.value > 0.65,
        "{direct:?}"
    );
    assert!(direct.p_value < direct.level);
    assert!(direct.message.contains("rose"), "{}", direct.message);
    // Nothing else changed.
    assert!(
        ev.alerts.iter().all(|a| a.kind == AlertKind::RouteShift),
        "{:#?}",
        ev.alerts
    );
}

#[test]
fn a_slower_node_and_dearer_requests_fire() {
    let drift = Traffic {
        llm_ms: (600, 900),
        // Output tokens are priced per 1k: this more than doubles the cost.
        tokens: (5_000, 8_000),
        ..NORMAL
    };
    let (_dir, mut s) = store(5, drift, 150);
    let ev = evaluate(&mut s, &options()).unwrap();
    let p99 = ev
        .alerts
        .iter()
        .find(|a| a.kind == AlertKind::P99Regression)
        .unwrap();
    // Only the LLM got slower; the fallback-free synth has one LLM span per request.
    assert_eq!(p99.node, "llm");
    assert_eq!((p99.baseline.samples, p99.current.samples), (400, 150));
    assert!(
        p99.baseline.value < 260.0 && p99.current.value >= 600.0,
        "{p99:?}"
    );
    assert_eq!(
        ev.alerts
            .iter()
            .filter(|a| a.kind == AlertKind::P99Regression)
            .count(),
        1,
        "{:#?}",
        ev.alerts
    );
    let cost = ev
        .alerts
        .iter()
        .find(|a| a.kind == AlertKind::CostJump)
        .unwrap();
    assert!(cost.current.value > cost.baseline.value * 1.25, "{cost:?}");
    assert_eq!(cost.node, "");
}

#[test]
fn too_few_samples_fire_nothing_even_with_drift() {
    let drift = Traffic {
        retrieval_share: 0.0,
        llm_ms: (900, 1000),
        tokens: (900, 1000),
    };
    let (_dir, mut s) = store(7, drift, 20);
    let ev = evaluate(&mut s, &options()).unwrap();
    assert!(ev.alerts.is_empty(), "{:#?}", ev.alerts);
    // With the guard lowered, the same data fires.
    let mut o = options();
    o.thresholds.min_samples = 10;
    assert!(!evaluate(&mut s, &o).unwrap().alerts.is_empty());
}

#[test]
fn test_statistics_match_known_values() {
    assert!((erfc(0.0) - 1.0).abs() < 1e-7);
    assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
    assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
    assert!((erfc(2.5) - 0.000_406_952).abs() < 1e-7);
    assert!((binomial_upper_tail(10, 1, 0.5) - (1.0 - 0.5f64.powi(10))).abs() < 1e-12);
    assert!((binomial_upper_tail(100, 5, 0.01) - 0.003_432_32).abs() < 1e-7);
    assert!((binomial_upper_tail(1000, 25, 0.01) - 4.202_92e-5).abs() < 1e-9);
    assert_eq!(binomial_upper_tail(5, 0, 0.01), 1.0);
    assert_eq!(binomial_upper_tail(5, 6, 0.01), 0.0);
}

#[test]
fn thresholds_name_each_bad_field() {
    assert!(Thresholds::default().problems().is_empty());
    let bad = Thresholds {
        min_samples: 1,
        alpha: 1.5,
        route_shift: 0.0,
        p99_ratio: 0.9,
        p99_min_ms: -1.0,
        cost_ratio: f64::NAN,
    };
    let p = bad.problems();
    assert_eq!(p.len(), 6, "{p:?}");
    for field in [
        "min_samples",
        "alpha",
        "route_shift",
        "p99_ratio",
        "p99_min_ms",
        "cost_ratio",
    ] {
        assert!(
            p.iter().any(|m| m.contains(&format!("`{field}`"))),
            "{field}: {p:?}"
        );
    }
}
