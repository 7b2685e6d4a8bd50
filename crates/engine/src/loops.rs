//! Bounded loops at run time: which iteration each loop is in, the bound
//! checked when its back edge is reached, and the loop's record for the
//! path ([`LoopRun`]).
//!
//! Semantics (docs/topology.md, "Loops"): a loop's body runs like any part
//! of the path; when its back edge resolves *taken* and the bound allows
//! another iteration, the body's nodes and inner edges are reset and the
//! loop's first node runs again, reading the latest outputs. Edges that
//! leave the body are held until the loop ends, then resolve as they did
//! in its last iteration, so nothing after the loop runs early or is
//! skipped for an iteration that was not the last. Budgets are checked
//! when the back edge is reached: an iteration already running finishes.

use std::sync::Arc;

use glassbox_topology::{Loop, NodeId, Topology};
use glassbox_trace::{
    IterationRun, LoopRun, LoopStop, RanNode, SpanRecord, SpanRole, span_iteration,
};
use rust_decimal::Decimal;
use tokio::time::Instant;

/// One loop's state in one request.
#[derive(Debug, Default)]
pub(crate) struct LoopState {
    /// The iteration running now (from 1); 0 until a body node runs.
    pub iteration: u32,
    /// When the first iteration's first node started.
    pub started: Option<Instant>,
    /// The body's nodes that ran, per iteration, with their labels.
    pub ran: Vec<Vec<(NodeId, Option<String>)>>,
    /// Why it stopped, once it has.
    pub stopped: Option<LoopStop>,
}

impl LoopState {
    /// Notes that a body node is dispatched; returns its iteration.
    pub fn enter(&mut self) -> u32 {
        if self.iteration == 0 {
            self.iteration = 1;
            self.started = Some(Instant::now());
            self.ran.push(Vec::new());
        }
        self.iteration
    }

    /// Notes a body node that finished in the current iteration.
    pub fn finished(&mut self, n: NodeId, label: Option<String>) {
        if let Some(round) = self.ran.last_mut() {
            round.push((n, label));
        }
    }

    /// Starts the next iteration.
    pub fn next(&mut self) {
        self.iteration += 1;
        self.ran.push(Vec::new());
    }
}

/// What a loop's body spent so far, from its spans.
#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    tokens: u64,
    cost: Decimal,
}

/// Whether a span is one of the loop's own attempts (a body node's or a
/// fallback's standing in for one; steps are inside their attempt).
fn in_body(topology: &Topology, l: &Loop, s: &SpanRecord) -> bool {
    if matches!(s.role, SpanRole::Step { .. }) || span_iteration(s).is_none() {
        return false;
    }
    let node = match &s.role {
        SpanRole::Fallback { replaces } => replaces,
        _ => &s.node,
    };
    topology.node_id(node).is_some_and(|n| l.body.contains(&n))
}

fn spent<'a>(
    topology: &Topology,
    l: &Loop,
    spans: impl Iterator<Item = &'a Arc<SpanRecord>>,
) -> Spent {
    let mut total = Spent::default();
    for s in spans.filter(|s| in_body(topology, l, s)) {
        total.tokens = total.tokens.saturating_add(
            s.usage
                .input_tokens
                .unwrap_or(0)
                .saturating_add(s.usage.output_tokens.unwrap_or(0)),
        );
        total.cost = total.cost.saturating_add(s.cost);
    }
    total
}

/// The bound that allows no further iteration, when one does not.
pub(crate) fn over_bound(
    topology: &Topology,
    l: &Loop,
    state: &LoopState,
    spans: &[Arc<SpanRecord>],
) -> Option<LoopStop> {
    let b = &l.bound;
    let stop = |bound: &str, limit: String, spent: String| {
        Some(LoopStop::Bound {
            bound: bound.to_string(),
            limit,
            spent,
        })
    };
    if state.iteration >= b.max_iterations {
        let n = state.iteration;
        return stop(
            "max_iterations",
            b.max_iterations.to_string(),
            format!("{n} iteration{}", if n == 1 { "" } else { "s" }),
        );
    }
    let used = spent(topology, l, spans.iter());
    if let Some(max) = b.max_tokens
        && used.tokens >= max
    {
        return stop(
            "max_tokens",
            max.to_string(),
            format!("{} tokens", used.tokens),
        );
    }
    if let Some(max) = b.max_cost
        && used.cost >= max
    {
        return stop(
            "max_cost",
            max.normalize().to_string(),
            format!("{} {}", used.cost.normalize(), topology.currency),
        );
    }
    let elapsed = state.started.map(|s| s.elapsed()).unwrap_or_default();
    if let Some(max) = b.max_time
        && elapsed >= max
    {
        return stop(
            "max_time_ms",
            max.as_millis().to_string(),
            format!("{} ms", elapsed.as_millis()),
        );
    }
    None
}

/// The loop's record for the path: each iteration's nodes, labels,
/// tokens, cost and times (from the spans tagged with it), and why it
/// stopped. `None` when no body node ran.
pub(crate) fn record(
    topology: &Topology,
    ids: &[Arc<str>],
    l: &Loop,
    state: &LoopState,
    spans: &[Arc<SpanRecord>],
) -> Option<LoopRun> {
    if state.iteration == 0 {
        return None;
    }
    let iterations = state
        .ran
        .iter()
        .enumerate()
        .map(|(i, ran)| {
            let k = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let mine: Vec<&Arc<SpanRecord>> = spans
                .iter()
                .filter(|s| span_iteration(s) == Some(k) && in_body(topology, l, s))
                .collect();
            let used = spent(topology, l, mine.iter().copied());
            IterationRun {
                ran: ran
                    .iter()
                    .map(|(n, label)| RanNode {
                        node: ids[n.0].clone(),
                        label: label.clone(),
                    })
                    .collect(),
                tokens: used.tokens,
                cost: used.cost,
                start_us: mine.iter().map(|s| s.start_us).min().unwrap_or(0),
                end_us: mine.iter().map(|s| s.end_us).max().unwrap_or(0),
            }
        })
        .collect();
    Some(LoopRun {
        from: ids[l.tail.0].clone(),
        to: ids[l.head.0].clone(),
        body: l.body.iter().map(|n| ids[n.0].clone()).collect(),
        max_iterations: l.bound.max_iterations,
        iterations,
        stopped: state.stopped.clone().unwrap_or(LoopStop::Ended),
    })
}
