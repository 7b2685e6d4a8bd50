//! Two versions of one topology side by side: cost, latency P50/P95/P99
//! (per request and per node), the path mix, guard failures and error
//! rates, each with a significance test so that only differences larger
//! than noise are marked (`glassbox report --compare`, `GET
//! /v1/reports/compare`).
//!
//! Tests ([`crate::stats`]): Mann–Whitney U for latency and cost (whole
//! distributions, robust to tails), the two-proportion z test for rates,
//! Pearson's chi-square for the path mix; a difference is marked when it
//! holds after Holm's correction across every test of the comparison at
//! level `alpha` (default 5%), so comparing twenty nodes does not mark one
//! by chance.
//!
//! Reads the same narrow rows as [`crate::report`] (one scan of requests,
//! one of spans, both restricted to the two versions).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::Result;
use crate::query::{Filter, RequestFacts, SpanFacts, TraceStore};
use crate::report::{Percentiles, percentiles};
use crate::stats::{self, TestResult};

/// The family-wise significance level by default.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// What to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    pub topology: String,
    /// The baseline version.
    pub a: String,
    /// The version compared against it.
    pub b: String,
    /// Time range (its topology, version and status are ignored).
    pub filter: Filter,
    /// Node kinds that check output (their failed or flagged checks are
    /// guard failures), from the kind registry.
    pub guard_kinds: Vec<String>,
    /// Family-wise significance level, e.g. 0.05.
    pub alpha: f64,
}

/// A sample's size and percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dist {
    pub n: u64,
    #[serde(flatten)]
    pub p: Percentiles,
}

/// A rate: `hits` of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    pub n: u64,
    pub hits: u64,
    pub rate: f64,
}

/// A measure compared: both sides and the test (absent when a side has too
/// few values to test).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff<T> {
    pub name: String,
    pub a: T,
    pub b: T,
    pub test: Option<TestResult>,
}

impl<T> Diff<T> {
    /// Larger than noise.
    pub fn marked(&self) -> bool {
        self.test.is_some_and(|t| t.significant)
    }
}

/// One path's share on each side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathShare {
    pub path: String,
    pub a: Rate,
    pub b: Rate,
}

/// One node on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDiff {
    pub node: String,
    pub latency_ms: Diff<Dist>,
    pub error_rate: Diff<Rate>,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub topology_id: String,
    pub a: String,
    pub b: String,
    pub alpha: f64,
    /// The tests used, in words.
    pub method: &'static str,
    pub requests: Diff<u64>,
    pub latency_ms: Diff<Dist>,
    pub cost: Diff<Dist>,
    /// Requests that failed, timed out, fell back; guard checks that failed.
    pub rates: Vec<Diff<Rate>>,
    /// Paths taken, most frequent (both sides together) first.
    pub paths: Vec<PathShare>,
    /// Chi-square over the path mix.
    pub path_test: Option<TestResult>,
    pub nodes: Vec<NodeDiff>,
}

impl Comparison {
    /// Whether anything is marked.
    pub fn any_marked(&self) -> bool {
        self.latency_ms.marked()
            || self.cost.marked()
            || self.rates.iter().any(Diff::marked)
            || self.path_test.is_some_and(|t| t.significant)
            || self
                .nodes
                .iter()
                .any(|n| n.latency_ms.marked() || n.error_rate.marked())
    }
}

/// The method, as reported.
pub const METHOD: &str = "Mann-Whitney U (latency, cost), two-proportion z (rates), \
     chi-square (path mix); marked when significant after Holm's correction across all tests";

#[derive(Default)]
struct Side {
    durations: Vec<f64>,
    costs: Vec<f64>,
    failed: u64,
    timeouts: u64,
    fallbacks: u64,
    paths: HashMap<String, u64>,
    nodes: BTreeMap<String, NodeSide>,
    guard_checks: u64,
    guard_failures: u64,
}

#[derive(Default)]
struct NodeSide {
    durations: Vec<f64>,
    errors: u64,
}

fn rate(hits: u64, n: u64) -> Rate {
    Rate {
        n,
        hits,
        rate: if n == 0 { 0.0 } else { hits as f64 / n as f64 },
    }
}

fn dist_diff(name: &str, a: &mut [f64], b: &mut [f64]) -> Diff<Dist> {
    let test = stats::mann_whitney_u(a, b);
    Diff {
        name: name.to_string(),
        a: Dist {
            n: a.len() as u64,
            p: percentiles(a),
        },
        b: Dist {
            n: b.len() as u64,
            p: percentiles(b),
        },
        test,
    }
}

fn rate_diff(name: &str, a: Rate, b: Rate) -> Diff<Rate> {
    Diff {
        name: name.to_string(),
        test: stats::two_proportion_z(a.hits, a.n, b.hits, b.n),
        a,
        b,
    }
}

/// Whether a span of a guard kind failed its check: it ended in error or
/// timeout, or it replaced the output (its tags list the rules it hit).
fn guard_failed(s: &SpanFacts<'_>) -> bool {
    matches!(s.status, "error" | "timeout") || s.tags.contains("\"rules_hit\"")
}

/// Compares versions `a` and `b` of one topology.
pub fn compare(store: &mut dyn TraceStore, options: &CompareOptions) -> Result<Comparison> {
    let mut filter = options.filter.clone();
    filter.topology = Some(options.topology.clone());
    filter.status = None;
    let mut sides: [Side; 2] = Default::default();
    let side_of = |version: &str| {
        if version == options.a {
            Some(0)
        } else if version == options.b {
            Some(1)
        } else {
            None
        }
    };
    // One version per scan keeps the store's version filter (and index) in play.
    for (i, version) in [&options.a, &options.b].into_iter().enumerate() {
        filter.version = Some(version.clone());
        let side = &mut sides[i];
        store.scan_requests(&filter, &mut |r: RequestFacts<'_>| {
            if side_of(r.version) != Some(i) {
                return;
            }
            side.durations.push(r.duration_us as f64 / 1000.0);
            side.costs.push(r.cost);
            side.failed += u64::from(r.status == "failed");
            side.timeouts += u64::from(r.timeouts > 0);
            side.fallbacks += u64::from(r.degraded);
            *side.paths.entry(r.path_key.to_string()).or_default() += 1;
        })?;
        store.scan_spans(&filter, &mut |s: SpanFacts<'_>| {
            if side_of(s.version) != Some(i) {
                return;
            }
            let node = side.nodes.entry(s.node.to_string()).or_default();
            node.durations.push(s.duration_us as f64 / 1000.0);
            node.errors += u64::from(s.status == "error" || s.status == "timeout");
            if options.guard_kinds.iter().any(|k| k == s.kind) {
                side.guard_checks += 1;
                side.guard_failures += u64::from(guard_failed(&s));
            }
        })?;
    }
    let [mut a, mut b] = sides;
    let (na, nb) = (a.durations.len() as u64, b.durations.len() as u64);

    let mut all_paths: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (p, c) in &a.paths {
        all_paths.entry(p.clone()).or_default().0 = *c;
    }
    for (p, c) in &b.paths {
        all_paths.entry(p.clone()).or_default().1 = *c;
    }
    let counts: Vec<(u64, u64)> = all_paths.values().copied().collect();
    let mut path_test = stats::chi_square(&counts);
    let mut paths: Vec<PathShare> = all_paths
        .into_iter()
        .map(|(path, (ca, cb))| PathShare {
            path,
            a: rate(ca, na),
            b: rate(cb, nb),
        })
        .collect();
    paths.sort_by(|x, y| {
        (y.a.hits + y.b.hits)
            .cmp(&(x.a.hits + x.b.hits))
            .then_with(|| x.path.cmp(&y.path))
    });

    let node_names: Vec<String> = a
        .nodes
        .keys()
        .chain(b.nodes.keys())
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut nodes: Vec<NodeDiff> = node_names
        .into_iter()
        .map(|node| {
            let mut x = a.nodes.remove(&node).unwrap_or_default();
            let mut y = b.nodes.remove(&node).unwrap_or_default();
            let (nx, ny) = (x.durations.len() as u64, y.durations.len() as u64);
            NodeDiff {
                latency_ms: dist_diff("latency_ms", &mut x.durations, &mut y.durations),
                error_rate: rate_diff("error_rate", rate(x.errors, nx), rate(y.errors, ny)),
                node,
            }
        })
        .collect();

    let mut rates = vec![
        rate_diff("error_rate", rate(a.failed, na), rate(b.failed, nb)),
        rate_diff("timeout_rate", rate(a.timeouts, na), rate(b.timeouts, nb)),
        rate_diff(
            "fallback_rate",
            rate(a.fallbacks, na),
            rate(b.fallbacks, nb),
        ),
    ];
    if a.guard_checks + b.guard_checks > 0 {
        rates.push(rate_diff(
            "guard_failure_rate",
            rate(a.guard_failures, a.guard_checks),
            rate(b.guard_failures, b.guard_checks),
        ));
    }
    let mut latency_ms = dist_diff("latency_ms", &mut a.durations, &mut b.durations);
    let mut cost = dist_diff("cost", &mut a.costs, &mut b.costs);

    // Every test of the comparison is one family for Holm's correction.
    {
        let mut family: Vec<&mut TestResult> = Vec::new();
        family.extend(latency_ms.test.as_mut());
        family.extend(cost.test.as_mut());
        family.extend(path_test.as_mut());
        for r in &mut rates {
            family.extend(r.test.as_mut());
        }
        for n in &mut nodes {
            family.extend(n.latency_ms.test.as_mut());
            family.extend(n.error_rate.test.as_mut());
        }
        stats::holm(&mut family, options.alpha);
    }
    Ok(Comparison {
        topology_id: options.topology.clone(),
        a: options.a.clone(),
        b: options.b.clone(),
        alpha: options.alpha,
        method: METHOD,
        requests: Diff {
            name: "requests".into(),
            a: na,
            b: nb,
            test: None,
        },
        latency_ms,
        cost,
        rates,
        paths,
        path_test,
        nodes,
    })
}
