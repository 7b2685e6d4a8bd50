//! Drift alerts: the last window of traffic against a baseline window just
//! before it, per topology.
//!
//! Three kinds, each fired only when the change is both large (a threshold
//! in [`Thresholds`]) and unlikely to be noise (a test at `alpha`, split
//! over the comparisons made for that topology: Bonferroni), and only when
//! both windows hold at least `min_samples`:
//!
//! - [`AlertKind::RouteShift`]: a path's share of requests moved (product
//!   questions suddenly going down the direct path). Two-proportion z-test
//!   (pooled), two-sided, per path.
//! - [`AlertKind::P99Regression`]: a node's P99 latency grew. Exceedance
//!   test: by definition at most 1% of baseline spans are slower than the
//!   baseline P99, so the number of current spans above it is at most
//!   Binomial(n, 0.01) if nothing changed; the exact upper tail is the
//!   p-value. It needs no assumption about the shape of latencies.
//! - [`AlertKind::CostJump`]: the mean cost per request grew. Welch's
//!   t-test, one-sided, with the normal approximation (both windows hold at
//!   least `min_samples`, 50 by default).
//!
//! Evaluation reads the same narrow rows as reports ([`TraceStore::scan_requests`],
//! [`TraceStore::scan_spans`]) over the two windows only.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::query::{Filter, RequestFacts, SpanFacts, TraceStore};
use crate::report::percentiles;
use crate::stats::normal_sf;

/// When a change fires an alert. Every field has a default, so a config
/// file may set only some.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Fewest requests (routes, cost) or spans (a node's latency) each
    /// window must hold before it is compared.
    pub min_samples: u64,
    /// Significance level per topology, split over its comparisons.
    pub alpha: f64,
    /// Smallest move of a path's share of requests that fires (0.10: ten
    /// percentage points).
    pub route_shift: f64,
    /// Smallest current / baseline P99 ratio that fires.
    pub p99_ratio: f64,
    /// And the P99 must have grown by at least this many milliseconds.
    pub p99_min_ms: f64,
    /// Smallest current / baseline mean cost per request ratio that fires.
    pub cost_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_samples: 50,
            alpha: 0.001,
            route_shift: 0.10,
            p99_ratio: 1.5,
            p99_min_ms: 5.0,
            cost_ratio: 1.25,
        }
    }
}

impl Thresholds {
    /// Every problem with the values, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.min_samples < 2 {
            out.push(format!(
                "`min_samples` is {} (at least 2 are needed to compare)",
                self.min_samples
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            out.push(format!(
                "`alpha` is {} (use a value between 0 and 1, e.g. 0.001)",
                self.alpha
            ));
        }
        if !(self.route_shift > 0.0 && self.route_shift <= 1.0) {
            out.push(format!(
                "`route_shift` is {} (a share between 0 and 1, e.g. 0.10)",
                self.route_shift
            ));
        }
        for (name, v) in [
            ("p99_ratio", self.p99_ratio),
            ("cost_ratio", self.cost_ratio),
        ] {
            if !(v.is_finite() && v > 1.0) {
                out.push(format!("`{name}` is {v} (a ratio above 1, e.g. 1.5)"));
            }
        }
        if !(self.p99_min_ms.is_finite() && self.p99_min_ms >= 0.0) {
            out.push(format!("`p99_min_ms` is {} (0 or more)", self.p99_min_ms));
        }
        out
    }
}

/// What to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftOptions {
    /// Only this topology (else every topology with traffic).
    pub topology: Option<String>,
    /// The end of the current window (microseconds since the epoch).
    pub now_us: u64,
    /// The current window: the last `window_us` before `now_us`.
    pub window_us: u64,
    /// The baseline: the `baseline_us` just before the current window.
    pub baseline_us: u64,
    pub thresholds: Thresholds,
}

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    RouteShift,
    P99Regression,
    CostJump,
}

impl AlertKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::RouteShift => "route_shift",
            AlertKind::P99Regression => "p99_regression",
            AlertKind::CostJump => "cost_jump",
        }
    }

    /// The test behind it, in words.
    pub fn test(self) -> &'static str {
        match self {
            AlertKind::RouteShift => "two-proportion z-test (pooled, two-sided)",
            AlertKind::P99Regression => {
                "exceedance test: spans above the baseline P99, exact binomial tail at 1%"
            }
            AlertKind::CostJump => "Welch's t-test (one-sided, normal approximation)",
        }
    }
}

/// One window's side of the evidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    /// A path's share, a node's P99 in ms, or the mean cost per request.
    pub value: f64,
    /// Requests (routes, cost) or spans (latency) in the window.
    pub samples: u64,
}

/// A firing alert, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub topology: String,
    /// The node (P99), the path as `route>prompt>llm` (route shift), or
    /// empty (cost per request).
    pub node: String,
    pub baseline: Side,
    pub current: Side,
    /// The test's p-value, and the level it was held to (`alpha` over the
    /// number of comparisons).
    pub p_value: f64,
    pub level: f64,
    pub test: &'static str,
    /// The finding in words.
    pub message: String,
}

/// The alerts of one evaluation and what was compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub evaluated_at_us: u64,
    pub baseline_from_us: u64,
    pub window_from_us: u64,
    pub until_us: u64,
    pub thresholds: Thresholds,
    /// Requests read, per window (all topologies).
    pub baseline_requests: u64,
    pub current_requests: u64,
    pub alerts: Vec<Alert>,
}

/// Numbers of one topology in one window.
#[derive(Default)]
struct Window {
    requests: u64,
    paths: HashMap<String, u64>,
    cost: Moments,
    node_ms: BTreeMap<String, Vec<f64>>,
}

/// Count, mean and sum of squared deviations (Welford).
#[derive(Default, Clone, Copy)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn variance(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }
}

/// Compares the current window with the baseline, per topology.
pub fn evaluate(store: &mut dyn TraceStore, options: &DriftOptions) -> Result<Evaluation> {
    let until = i64::try_from(options.now_us).unwrap_or(i64::MAX);
    let window_from = until.saturating_sub(i64::try_from(options.window_us).unwrap_or(i64::MAX));
    let baseline_from =
        window_from.saturating_sub(i64::try_from(options.baseline_us).unwrap_or(i64::MAX));
    let filter = Filter {
        topology: options.topology.clone(),
        since_us: Some(baseline_from),
        until_us: Some(until),
        ..Filter::default()
    };
    // (topology, is current) → numbers.
    let mut requests: BTreeMap<(String, bool), Window> = BTreeMap::new();
    store.scan_requests(&filter, &mut |r: RequestFacts<'_>| {
        let current = r.started_at_us >= window_from;
        let w = match requests.get_mut(&(r.topology_id.to_string(), current)) {
            Some(w) => w,
            None => requests
                .entry((r.topology_id.to_string(), current))
                .or_default(),
        };
        w.requests += 1;
        *w.paths.entry(r.path_key.to_string()).or_default() += 1;
        w.cost.push(r.cost);
    })?;
    store.scan_spans(&filter, &mut |s: SpanFacts<'_>| {
        let current = s.req_started_at_us >= window_from;
        let w = match requests.get_mut(&(s.topology_id.to_string(), current)) {
            Some(w) => w,
            None => requests
                .entry((s.topology_id.to_string(), current))
                .or_default(),
        };
        match w.node_ms.get_mut(s.node) {
            Some(v) => v.push(s.duration_us as f64 / 1000.0),
            None => {
                w.node_ms
                    .insert(s.node.to_string(), vec![s.duration_us as f64 / 1000.0]);
            }
        }
    })?;

    let t = options.thresholds;
    let mut alerts = Vec::new();
    let mut counts = (0u64, 0u64);
    let topologies: Vec<String> = {
        let mut v: Vec<String> = requests.keys().map(|(t, _)| t.clone()).collect();
        v.dedup();
        v
    };
    for topology in topologies {
        let base = requests
            .remove(&(topology.clone(), false))
            .unwrap_or_default();
        let cur = requests
            .remove(&(topology.clone(), true))
            .unwrap_or_default();
        counts.0 += base.requests;
        counts.1 += cur.requests;
        route_shifts(&topology, &base, &cur, &t, &mut alerts);
        p99_regressions(&topology, base.node_ms, cur.node_ms, &t, &mut alerts);
        cost_jump(&topology, &base.cost, &cur.cost, &t, &mut alerts);
    }
    Ok(Evaluation {
        evaluated_at_us: crate::row::u(until),
        baseline_from_us: crate::row::u(baseline_from),
        window_from_us: crate::row::u(window_from),
        until_us: crate::row::u(until),
        thresholds: t,
        baseline_requests: counts.0,
        current_requests: counts.1,
        alerts,
    })
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn route_shifts(topology: &str, base: &Window, cur: &Window, t: &Thresholds, out: &mut Vec<Alert>) {
    if base.requests < t.min_samples || cur.requests < t.min_samples {
        return;
    }
    let mut paths: Vec<&String> = base.paths.keys().chain(cur.paths.keys()).collect();
    paths.sort();
    paths.dedup();
    let level = t.alpha / paths.len().max(1) as f64;
    let (nb, nc) = (base.requests as f64, cur.requests as f64);
    for path in paths {
        let b = base.paths.get(path).copied().unwrap_or(0) as f64;
        let c = cur.paths.get(path).copied().unwrap_or(0) as f64;
        let (pb, pc) = (b / nb, c / nc);
        let pooled = (b + c) / (nb + nc);
        let se = (pooled * (1.0 - pooled) * (1.0 / nb + 1.0 / nc)).sqrt();
        if se <= 0.0 || (pc - pb).abs() < t.route_shift {
            continue;
        }
        let p = 2.0 * normal_sf(((pc - pb) / se).abs());
        if p < level {
            let way = if pc > pb { "rose" } else { "fell" };
            out.push(Alert {
                kind: AlertKind::RouteShift,
                topology: topology.to_string(),
                node: path.clone(),
                baseline: Side {
                    value: pb,
                    samples: base.requests,
                },
                current: Side {
                    value: pc,
                    samples: cur.requests,
                },
                p_value: p,
                level,
                test: AlertKind::RouteShift.test(),
                message: format!(
                    "`{topology}`: the share of requests taking {} {way} from {} to {}",
                    path.replace('>', " → "),
                    pct(pb),
                    pct(pc)
                ),
            });
        }
    }
}

fn p99_regressions(
    topology: &str,
    base: BTreeMap<String, Vec<f64>>,
    mut cur: BTreeMap<String, Vec<f64>>,
    t: &Thresholds,
    out: &mut Vec<Alert>,
) {
    let compared: Vec<(String, Vec<f64>, Vec<f64>)> = base
        .into_iter()
        .filter_map(|(node, b)| {
            let c = cur.remove(&node)?;
            (b.len() as u64 >= t.min_samples && c.len() as u64 >= t.min_samples)
                .then_some((node, b, c))
        })
        .collect();
    let level = t.alpha / compared.len().max(1) as f64;
    for (node, mut b, mut c) in compared {
        let bp = percentiles(&mut b).p99;
        let cp = percentiles(&mut c).p99;
        if cp < bp * t.p99_ratio || cp - bp < t.p99_min_ms {
            continue;
        }
        let above = c.iter().filter(|&&x| x > bp).count() as u64;
        let p = binomial_upper_tail(c.len() as u64, above, 0.01);
        if p < level {
            out.push(Alert {
                kind: AlertKind::P99Regression,
                topology: topology.to_string(),
                node: node.clone(),
                baseline: Side {
                    value: bp,
                    samples: b.len() as u64,
                },
                current: Side {
                    value: cp,
                    samples: c.len() as u64,
                },
                p_value: p,
                level,
                test: AlertKind::P99Regression.test(),
                message: format!(
                    "`{topology}`: `{node}` P99 latency went from {bp:.1} ms to {cp:.1} ms \
                     ({above} of {} spans slower than the baseline P99)",
                    c.len()
                ),
            });
        }
    }
}

fn cost_jump(topology: &str, base: &Moments, cur: &Moments, t: &Thresholds, out: &mut Vec<Alert>) {
    if base.n < t.min_samples || cur.n < t.min_samples || cur.mean <= 0.0 {
        return;
    }
    if cur.mean < base.mean * t.cost_ratio {
        return;
    }
    let se = (base.variance() / base.n as f64 + cur.variance() / cur.n as f64).sqrt();
    let p = if se > 0.0 {
        normal_sf((cur.mean - base.mean) / se)
    } else {
        // Every request cost the same in each window, and the two differ.
        0.0
    };
    if p < t.alpha {
        out.push(Alert {
            kind: AlertKind::CostJump,
            topology: topology.to_string(),
            node: String::new(),
            baseline: Side {
                value: base.mean,
                samples: base.n,
            },
            current: Side {
                value: cur.mean,
                samples: cur.n,
            },
            p_value: p,
            level: t.alpha,
            test: AlertKind::CostJump.test(),
            message: format!(
                "`{topology}`: mean cost per request went from {:.6} to {:.6}",
                base.mean, cur.mean
            ),
        });
    }
}

/// P(X ≥ k) for X ~ Binomial(n, p), summed from k upwards in log space (no
/// underflow for large n).
pub fn binomial_upper_tail(n: u64, k: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    let (n_f, q) = (n as f64, 1.0 - p);
    // ln C(n, k) = Σ ln((n - k + i) / i), i = 1..k.
    let ln_choose: f64 = (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum();
    let mut ln_term = ln_choose + k as f64 * p.ln() + (n - k) as f64 * q.ln();
    let mut sum = 0.0;
    let mut i = k;
    loop {
        let term = ln_term.exp();
        sum += term;
        if i >= n || (i as f64 > n_f * p && term < sum * 1e-17) {
            break;
        }
        ln_term += ((n - i) as f64 / (i + 1) as f64).ln() + (p / q).ln();
        i += 1;
    }
    sum.min(1.0)
}

#[cfg(test)]
#[path = "drift_tests.rs"]
mod tests;
