//! Two requests side by side, and where they first went different ways.
//!
//! [`TraceDiff::between`] lines up two stored requests node by node (in the
//! path's topological order) and edge by edge: status, label, attempts,
//! guard outcome, timings, tokens, cost and the input/output summaries of
//! each node. It then walks the path once to find the **first divergence**:
//! the earliest node whose decision differs (it ran in one request and not
//! the other, emitted another label, its guard judged differently, it needed
//! other attempts or failed), or, when every decision matches, the first
//! place the data differs (the request input, then a node's output).
//!
//! The divergence is data ([`Divergence`]); [`TraceDiff::explain`] renders
//! it in English or Chinese from that data, like [`crate::explain::compose`]
//! does for one request, so both languages say the same thing and the API
//! can return either.
//!
//! It lives with the trace model because it reads only trace types: the
//! CLI's `trace diff`, the server's diff endpoint and `glassbox test
//! --replay` (which asks "did the path, the guard or the cost change?") all
//! share it.

mod words;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::{
    ErrorRecord, Fact, NodeStatus, PathRecord, RequestId, RequestRecord, RequestStatus, SpanRecord,
    SpanStatus,
};

/// One request as the diff reads it: its record and its spans.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub record: &'a RequestRecord,
    pub spans: &'a [SpanRecord],
}

/// What an output guard decided about a request's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardOutcome {
    /// Every rule passed the first time.
    Passed,
    /// It passed once the guard had the answer regenerated.
    PassedAfterRerun,
    /// A rule was violated and the answer was replaced.
    Replaced,
    /// A rule was violated and the guard only flagged it.
    Flagged,
    /// The guard rejected the answer and failed the node.
    Rejected,
}

impl GuardOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardOutcome::Passed => "passed",
            GuardOutcome::PassedAfterRerun => "passed_after_rerun",
            GuardOutcome::Replaced => "replaced",
            GuardOutcome::Flagged => "flagged",
            GuardOutcome::Rejected => "rejected",
        }
    }

    /// Whether the answer got through the guard unchanged.
    pub fn passed(self) -> bool {
        matches!(self, GuardOutcome::Passed | GuardOutcome::PassedAfterRerun)
    }
}

impl std::fmt::Display for GuardOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of every output guard that judged this request, by node id:
/// read from the guards' facts, and from a node whose last attempt failed
/// with `rejected` (what a guard that fails the request records).
pub fn guard_outcomes(
    record: &RequestRecord,
    spans: &[SpanRecord],
) -> BTreeMap<Arc<str>, GuardOutcome> {
    let mut out = BTreeMap::new();
    for nf in &record.explanation.facts {
        let reran = nf.facts.iter().any(|f| matches!(f, Fact::Reran { .. }));
        let judged = nf.facts.iter().rev().find_map(|f| match f {
            Fact::Guarded { passed, action, .. } => Some((*passed, action.as_deref())),
            _ => None,
        });
        let outcome = match judged {
            Some((true, _)) if reran => GuardOutcome::PassedAfterRerun,
            Some((true, _)) => GuardOutcome::Passed,
            Some((false, Some("replaced"))) => GuardOutcome::Replaced,
            Some((false, _)) => GuardOutcome::Flagged,
            None => continue,
        };
        out.insert(nf.node.clone(), outcome);
    }
    for node in &record.path.nodes {
        if node.status != NodeStatus::Failed || out.contains_key(&node.id) {
            continue;
        }
        let last = spans
            .iter()
            .filter(|s| s.node == node.id)
            .max_by_key(|s| s.attempt);
        if last
            .and_then(|s| s.error.as_ref())
            .is_some_and(|e| e.code == "rejected")
        {
            out.insert(node.id.clone(), GuardOutcome::Rejected);
        }
    }
    out
}

/// The nodes a request ran, in path order, each with the label it emitted:
/// what "the path" means when two runs are compared.
pub fn path_taken(path: &PathRecord) -> Vec<Arc<str>> {
    path.nodes
        .iter()
        .filter(|n| {
            matches!(
                n.status,
                NodeStatus::Succeeded | NodeStatus::FellBack | NodeStatus::Failed
            )
        })
        .map(|n| n.id.clone())
        .collect()
}

/// The request as a whole, for the diff's header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestSide {
    pub request_id: RequestId,
    pub topology_id: Arc<str>,
    pub version: Arc<str>,
    pub status: RequestStatus,
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorRecord>,
    pub duration_us: u64,
    pub cost: Decimal,
    pub currency: Arc<str>,
    pub input_summary: String,
    pub output_summary: String,
    /// The nodes that ran, in path order.
    pub path: Vec<Arc<str>>,
}

/// One node in one request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSide {
    pub status: NodeStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Arc<str>>,
    pub duration_us: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost: Decimal,
    /// From the node's last attempt (absent when it never ran).
    pub input_summary: Option<Arc<str>>,
    pub output_summary: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardOutcome>,
    /// The last attempt's error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorRecord>,
    /// What the node said about its decision (the explanation's facts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Fact>,
    /// For a node in a loop's body: the iterations it ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// For the first node of a loop's body: why the loop stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_stop: Option<crate::LoopStop>,
}

impl NodeSide {
    fn ran(&self) -> bool {
        matches!(
            self.status,
            NodeStatus::Succeeded | NodeStatus::FellBack | NodeStatus::Failed
        )
    }
}

/// One node, in both requests (absent on a side whose topology lacks it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    pub node: Arc<str>,
    #[serde(rename = "type")]
    pub kind: Arc<str>,
    pub a: Option<NodeSide>,
    pub b: Option<NodeSide>,
    /// Whether the node's decision or data differ (status, label, attempts,
    /// guard, error, input or output); timings and cost alone do not count.
    pub differs: bool,
}

/// One edge as one request saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgeSide {
    pub taken: bool,
    pub why: String,
}

/// One edge, in both requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgeRow {
    pub from: Arc<str>,
    pub to: Arc<str>,
    pub a: Option<EdgeSide>,
    pub b: Option<EdgeSide>,
    /// Whether one request took it and the other did not.
    pub differs: bool,
}

/// The first place the two requests differ, as data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Divergence {
    /// A node ran in one request and not in the other, or ended otherwise.
    Status {
        node: Arc<str>,
        a: NodeStatus,
        b: NodeStatus,
    },
    /// A node emitted different labels (a router chose another branch).
    Label {
        node: Arc<str>,
        a: Option<String>,
        b: Option<String>,
    },
    /// An output guard judged the answers differently.
    Guard {
        node: Arc<str>,
        a: Option<GuardOutcome>,
        b: Option<GuardOutcome>,
    },
    /// A loop's body ran a different number of times (`node`: the body's
    /// first node).
    Iterations { node: Arc<str>, a: u32, b: u32 },
    /// A node needed a different number of attempts (retries, reruns).
    Attempts { node: Arc<str>, a: u32, b: u32 },
    /// Same path and decisions; the requests' inputs differ.
    Input { a: String, b: String },
    /// Same input, path and decisions; this node's output is the first to differ.
    Output {
        node: Arc<str>,
        a: Option<Arc<str>>,
        b: Option<Arc<str>>,
    },
}

impl Divergence {
    /// The node where the requests part, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Divergence::Status { node, .. }
            | Divergence::Label { node, .. }
            | Divergence::Guard { node, .. }
            | Divergence::Attempts { node, .. }
            | Divergence::Iterations { node, .. }
            | Divergence::Output { node, .. } => Some(node),
            Divergence::Input { .. } => None,
        }
    }

    /// Whether the divergence is a different decision (path, label, guard,
    /// attempts) rather than different data on the same path.
    pub fn is_decision(&self) -> bool {
        !matches!(self, Divergence::Input { .. } | Divergence::Output { .. })
    }
}

/// Two requests side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDiff {
    pub a: RequestSide,
    pub b: RequestSide,
    /// Every node of either request, in path order (A's, then B's extra).
    pub nodes: Vec<NodeRow>,
    pub edges: Vec<EdgeRow>,
    /// `None` when the requests made the same decisions on the same data.
    pub first_divergence: Option<Divergence>,
}

impl TraceDiff {
    /// Lines up `a` and `b` and finds where they first differ.
    pub fn between(a: Side<'_>, b: Side<'_>) -> TraceDiff {
        let mut order: Vec<(Arc<str>, Arc<str>)> = a
            .record
            .path
            .nodes
            .iter()
            .map(|n| (n.id.clone(), n.kind.clone()))
            .collect();
        for n in &b.record.path.nodes {
            if !order.iter().any(|(id, _)| *id == n.id) {
                order.push((n.id.clone(), n.kind.clone()));
            }
        }
        let (guards_a, guards_b) = (
            guard_outcomes(a.record, a.spans),
            guard_outcomes(b.record, b.spans),
        );
        let nodes: Vec<NodeRow> = order
            .into_iter()
            .map(|(node, kind)| {
                let na = node_side(a, &guards_a, &node);
                let nb = node_side(b, &guards_b, &node);
                let differs = match (&na, &nb) {
                    (Some(x), Some(y)) => node_differs(x, y),
                    _ => true,
                };
                NodeRow {
                    node,
                    kind,
                    a: na,
                    b: nb,
                    differs,
                }
            })
            .collect();
        let edges = edge_rows(&a.record.path, &b.record.path);
        let first_divergence = first_divergence(a.record, b.record, &nodes);
        TraceDiff {
            a: request_side(a.record),
            b: request_side(b.record),
            nodes,
            edges,
            first_divergence,
        }
    }

    /// Nodes that ran in A only, and in B only (path order).
    pub fn only_in(&self) -> (Vec<&str>, Vec<&str>) {
        let ran = |s: &Option<NodeSide>| s.as_ref().is_some_and(NodeSide::ran);
        let pick = |first: bool| {
            self.nodes
                .iter()
                .filter(|r| {
                    let (x, y) = (ran(&r.a), ran(&r.b));
                    if first { x && !y } else { y && !x }
                })
                .map(|r| &*r.node)
                .collect()
        };
        (pick(true), pick(false))
    }
}

fn request_side(r: &RequestRecord) -> RequestSide {
    RequestSide {
        request_id: r.request_id,
        topology_id: r.topology_id.clone(),
        version: r.version.clone(),
        status: r.status,
        degraded: r.degraded,
        error: r.error.clone(),
        duration_us: r.duration_us,
        cost: r.receipt.total,
        currency: r.receipt.currency.clone(),
        input_summary: r.input_summary.clone(),
        output_summary: r.output_summary.clone(),
        path: path_taken(&r.path),
    }
}

fn node_side(
    side: Side<'_>,
    guards: &BTreeMap<Arc<str>, GuardOutcome>,
    id: &str,
) -> Option<NodeSide> {
    let n = side.record.path.node(id)?;
    let spans: Vec<&SpanRecord> = side.spans.iter().filter(|s| &*s.node == id).collect();
    let looped = side.record.path.loop_of(id);
    let iterations = looped.map(|l| {
        let ran = l
            .iterations
            .iter()
            .filter(|it| it.ran.iter().any(|r| &*r.node == id))
            .count();
        u32::try_from(ran).unwrap_or(u32::MAX)
    });
    let loop_stop = looped
        .filter(|l| l.body.first().is_some_and(|b| &**b == id))
        .map(|l| l.stopped.clone());
    let last = spans.iter().max_by_key(|s| (s.attempt, s.end_us)).copied();
    let tokens = |f: fn(&SpanRecord) -> Option<u64>| {
        spans
            .iter()
            .filter_map(|s| f(s))
            .reduce(|x, y| x.saturating_add(y))
    };
    Some(NodeSide {
        status: n.status,
        label: side
            .record
            .labels
            .get(id)
            .cloned()
            .or_else(|| n.label.clone()),
        attempts: n.attempts,
        fallback: n.fallback.clone(),
        duration_us: n.duration_us,
        input_tokens: tokens(|s| s.usage.input_tokens),
        output_tokens: tokens(|s| s.usage.output_tokens),
        cost: side.record.receipt.node_total(id),
        input_summary: last.map(|s| s.input_summary.clone()),
        output_summary: last
            .filter(|s| s.status == SpanStatus::Ok)
            .map(|s| s.output_summary.clone()),
        guard: guards.get(id).copied(),
        error: last.and_then(|s| s.error.clone()),
        facts: side
            .record
            .explanation
            .facts
            .iter()
            .filter(|nf| &*nf.node == id)
            .flat_map(|nf| nf.facts.iter().cloned())
            .collect(),
        iterations,
        loop_stop,
    })
}

fn node_differs(a: &NodeSide, b: &NodeSide) -> bool {
    a.status != b.status
        || a.label != b.label
        || a.attempts != b.attempts
        || a.iterations != b.iterations
        || a.guard != b.guard
        || a.error.as_ref().map(|e| &e.code) != b.error.as_ref().map(|e| &e.code)
        || a.input_summary != b.input_summary
        || a.output_summary != b.output_summary
}

fn edge_rows(a: &PathRecord, b: &PathRecord) -> Vec<EdgeRow> {
    let side = |p: &PathRecord, from: &str, to: &str| {
        p.edge(from, to).map(|e| EdgeSide {
            taken: e.taken,
            why: e.why.to_string(),
        })
    };
    let mut keys: Vec<(Arc<str>, Arc<str>)> = a
        .edges
        .iter()
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    for e in &b.edges {
        if !keys.iter().any(|(f, t)| *f == e.from && *t == e.to) {
            keys.push((e.from.clone(), e.to.clone()));
        }
    }
    keys.into_iter()
        .map(|(from, to)| {
            let (ea, eb) = (side(a, &from, &to), side(b, &from, &to));
            let differs = ea.as_ref().map(|e| e.taken) != eb.as_ref().map(|e| e.taken);
            EdgeRow {
                from,
                to,
                a: ea,
                b: eb,
                differs,
            }
        })
        .collect()
}

/// Decisions first, in path order; then the data on the same path.
fn first_divergence(a: &RequestRecord, b: &RequestRecord, rows: &[NodeRow]) -> Option<Divergence> {
    for row in rows {
        let node = row.node.clone();
        let (Some(x), Some(y)) = (&row.a, &row.b) else {
            // Only one topology has this node: it is where they part if it ran.
            let status = |s: &Option<NodeSide>| s.as_ref().map_or(NodeStatus::NotRun, |s| s.status);
            let (sa, sb) = (status(&row.a), status(&row.b));
            if sa != sb {
                return Some(Divergence::Status { node, a: sa, b: sb });
            }
            continue;
        };
        if x.status != y.status {
            return Some(Divergence::Status {
                node,
                a: x.status,
                b: y.status,
            });
        }
        // A loop that ran another number of times decided differently in
        // some iteration: that comes before the labels of its last one.
        if let (Some(ia), Some(ib)) = (x.iterations, y.iterations)
            && ia != ib
            && x.loop_stop.is_some()
        {
            return Some(Divergence::Iterations { node, a: ia, b: ib });
        }
        if x.label != y.label {
            return Some(Divergence::Label {
                node,
                a: x.label.clone(),
                b: y.label.clone(),
            });
        }
        if x.guard != y.guard {
            return Some(Divergence::Guard {
                node,
                a: x.guard,
                b: y.guard,
            });
        }
        if x.attempts != y.attempts {
            return Some(Divergence::Attempts {
                node,
                a: x.attempts,
                b: y.attempts,
            });
        }
    }
    if a.input_summary != b.input_summary {
        return Some(Divergence::Input {
            a: a.input_summary.clone(),
            b: b.input_summary.clone(),
        });
    }
    rows.iter().find_map(|row| {
        let (x, y) = (row.a.as_ref()?, row.b.as_ref()?);
        (x.output_summary != y.output_summary).then(|| Divergence::Output {
            node: row.node.clone(),
            a: x.output_summary.clone(),
            b: y.output_summary.clone(),
        })
    })
}
