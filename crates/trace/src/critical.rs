//! The critical path of a request: the chain of nodes that set its
//! end-to-end latency.
//!
//! With parallel branches the request's latency is not the sum of its
//! nodes' times: a branch that finished while another was still running
//! added nothing. [`critical_path`] walks back from the node that finished
//! last, each time to the upstream node it waited for longest (the one that
//! finished last among the sources of its incoming edges), until it reaches
//! a node that waited for none. Every step says how much time it *added*:
//! from the moment the step before it finished (the request's start, for
//! the first) to its own end, so the steps add up to the chain's end.
//!
//! A pure function of the path (its nodes and edges) and the spans: the
//! engine uses it for the explanation, the store marks the spans on the
//! path so reports can count them, and the CLI, API and dashboard show it.
//! Rules it follows:
//! - A node's time runs from its first attempt's start to its last attempt's
//!   end, so retries and the backoff between them are part of it.
//! - Skipped and never-run nodes have no time and are never on the path.
//! - A fallback that stood in for a node comes after the node it replaced
//!   (its failed attempts), and the nodes downstream waited for the fallback.
//! - An edge that was not taken still gated its target if its source ran
//!   (the target waited for the condition to be decided).
//! - A node in a loop's body is one step per iteration: in iteration `k`
//!   it waited for the body's nodes of iteration `k`, the loop's first
//!   node for the last one of iteration `k - 1`, and a node after the
//!   loop for each source's last iteration.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::record::PathRecord;
use crate::span::SpanRecord;

/// The `why` of a path edge from a span to a span it encloses (ingested
/// traces: a parent span and its child). The parent did not wait for the
/// child to *start*, it waited for it to *end*: the walk goes down into the
/// enclosed child that ended last, and a child that waited for no sibling
/// started when its parent's predecessors had finished.
pub const ENCLOSES: &str = "parent span";

/// One node on the critical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalStep {
    pub node: Arc<str>,
    /// The loop iteration (from 1) of this step, when its node is in a
    /// loop's body: such a node can be on the path once per iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    /// Offsets from the request's start, in microseconds: the node's first
    /// attempt's start and last attempt's end.
    pub start_us: u64,
    pub end_us: u64,
    pub attempts: u32,
    /// Time between the step before it finishing (or the request starting)
    /// and this node starting: scheduling, not work.
    pub wait_us: u64,
    /// What this node added to the latency: from the step before it
    /// finishing (or the request starting) to its own end. The steps' added
    /// times sum to the end of the last step.
    pub added_us: u64,
}

/// The chain of nodes that set a request's latency, first to last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalPath {
    pub steps: Vec<CriticalStep>,
    /// When the last step ended (offset from the request's start).
    pub end_us: u64,
    /// The nodes' own times summed, as if they had run one after another:
    /// more than `end_us` when branches overlapped.
    pub nodes_total_us: u64,
    /// Nodes that ran but are not on the path (they ran alongside it).
    pub off_path: Vec<Arc<str>>,
}

impl CriticalPath {
    /// Whether `node` is on the path.
    pub fn contains(&self, node: &str) -> bool {
        self.steps.iter().any(|s| &*s.node == node)
    }

    /// The step that added the most time.
    pub fn dominant(&self) -> Option<&CriticalStep> {
        self.steps.iter().max_by_key(|s| s.added_us)
    }

    /// For each span (same order as given): the time its node added to the
    /// latency on the span that ended the node's time on the path (its last
    /// attempt), `None` on every other span. Stores keep this per span so
    /// reports can sum it without re-walking paths.
    pub fn span_marks<S: Borrow<SpanRecord>>(&self, spans: &[S]) -> Vec<Option<u64>> {
        let mut marks = vec![None; spans.len()];
        for step in &self.steps {
            let last = spans
                .iter()
                .map(Borrow::<SpanRecord>::borrow)
                .enumerate()
                .filter(|(_, s)| {
                    s.node == step.node && crate::span::span_iteration(s) == step.iteration
                })
                .max_by_key(|(i, s)| (s.end_us, *i));
            if let Some((i, _)) = last {
                marks[i] = Some(step.added_us);
            }
        }
        marks
    }
}

/// A node's time in one iteration of this request.
#[derive(Debug, Clone, Copy)]
struct Interval {
    start: u64,
    end: u64,
    attempts: u32,
    /// Position in the path, for ties.
    order: usize,
}

/// A node in one loop iteration (0: not in a loop's body).
type Key<'a> = (&'a str, u32);

/// The critical path of one request, from its path (nodes and edges) and
/// its spans. Nodes with no spans (a record stored without them) use the
/// times in the path. A node in a loop's body counts once per iteration
/// (its spans' [`ITERATION_TAG`](crate::ITERATION_TAG)): the loop's first
/// node waited, in iteration `k`, for its last node in iteration `k - 1`.
pub fn critical_path<'p, S: Borrow<SpanRecord>>(path: &'p PathRecord, spans: &[S]) -> CriticalPath {
    let mut times: HashMap<Key<'p>, Interval> = HashMap::new();
    for (order, node) in path.nodes.iter().enumerate() {
        let mut found = false;
        for s in spans
            .iter()
            .map(Borrow::borrow)
            .filter(|s| s.node == node.id)
        {
            found = true;
            let key = (&*node.id, crate::span::span_iteration(s).unwrap_or(0));
            let v = times.entry(key).or_insert(Interval {
                start: s.start_us,
                end: s.end_us,
                attempts: 0,
                order,
            });
            v.start = v.start.min(s.start_us);
            v.end = v.end.max(s.end_us);
            v.attempts += 1;
        }
        if !found && let (Some(start), Some(end)) = (node.start_us, node.end_us) {
            let iv = Interval {
                start,
                end: end.max(start),
                attempts: node.attempts,
                order,
            };
            times.insert((&*node.id, 0), iv);
        }
    }
    let keys: Vec<Key<'p>> = times.keys().copied().collect();
    // A node's last iteration: what a node after its loop waited for.
    let last_of = |id: &str| -> Option<Key<'p>> {
        latest(&times, keys.iter().copied().filter(|(n, _)| *n == id))
    };
    let same_loop = |a: &str, b: &str| {
        path.loop_of(a)
            .is_some_and(|l| l.body.iter().any(|x| &**x == b))
    };
    // Who each node waited for: the sources of its incoming edges that ran;
    // a source that fell back is stood in for by its fallback, which waited
    // for the source's own failed attempts.
    let fallback_of = |(id, k): Key<'p>| -> Key<'p> {
        path.node(id)
            .and_then(|n| n.fallback.as_deref())
            .map(|f| (f, k))
            .filter(|f| times.contains_key(f))
            .unwrap_or((id, k))
    };
    let preds = |(id, k): Key<'p>| -> Vec<Key<'p>> {
        if let Some(replaced) = path.node(id).and_then(|n| n.replaces.as_deref())
            && times.contains_key(&(replaced, k))
        {
            return vec![(replaced, k)];
        }
        path.edges
            .iter()
            .filter(|e| &*e.to == id && e.why != ENCLOSES)
            .filter_map(|e| {
                let from = &*e.from;
                let src = if path.is_back_edge(from, id) {
                    (k > 1).then(|| (from, k - 1))
                } else if k > 0 && same_loop(id, from) {
                    Some((from, k))
                } else {
                    last_of(from)
                }?;
                times.contains_key(&src).then(|| fallback_of(src))
            })
            .collect()
    };
    let enclosed = |(id, _): Key<'p>| -> Vec<Key<'p>> {
        path.edges
            .iter()
            .filter(|e| &*e.from == id && e.why == ENCLOSES)
            .filter_map(|e| last_of(&e.to))
            .collect()
    };
    let encloser = |(id, _): Key<'p>| -> Option<Key<'p>> {
        path.edges
            .iter()
            .filter(|e| &*e.to == id && e.why == ENCLOSES)
            .find_map(|e| last_of(&e.from))
    };
    let mut chain: Vec<Key<'p>> = Vec::new();
    let mut current = latest(&times, keys.iter().copied());
    while let Some(key) = current {
        if chain.contains(&key) {
            break; // never loop on a damaged record
        }
        chain.push(key);
        current = latest(&times, enclosed(key).into_iter())
            .or_else(|| latest(&times, preds(key).into_iter()));
        // Waited for no one inside its encloser: it started when the
        // encloser's own predecessors had finished.
        let mut at = key;
        while current.is_none() {
            let Some(outer) = encloser(at).filter(|o| chain.contains(o)) else {
                break;
            };
            current = latest(&times, preds(outer).into_iter());
            at = outer;
        }
    }
    chain.reverse();

    let mut steps = Vec::with_capacity(chain.len());
    let mut prev_end = 0u64;
    for key in &chain {
        let Some(iv) = times.get(key) else { continue };
        let (id, k) = *key;
        steps.push(CriticalStep {
            node: path
                .node(id)
                .map_or_else(|| Arc::from(id), |n| n.id.clone()),
            iteration: (k > 0).then_some(k),
            start_us: iv.start,
            end_us: iv.end,
            attempts: iv.attempts,
            wait_us: iv.start.saturating_sub(prev_end),
            added_us: iv.end.saturating_sub(prev_end),
        });
        prev_end = prev_end.max(iv.end);
    }
    let on_path = |id: &str| chain.iter().any(|(n, _)| *n == id);
    let off_path: Vec<Arc<str>> = path
        .nodes
        .iter()
        .filter(|n| keys.iter().any(|(k, _)| *k == &*n.id) && !on_path(&n.id))
        .map(|n| n.id.clone())
        .collect();
    CriticalPath {
        end_us: prev_end,
        nodes_total_us: times
            .values()
            .map(|iv| iv.end.saturating_sub(iv.start))
            .sum(),
        off_path,
        steps,
    }
}

/// Of `ids`, the node that finished last (ties: the later in the path).
fn latest<'a>(
    times: &HashMap<Key<'a>, Interval>,
    ids: impl Iterator<Item = Key<'a>>,
) -> Option<Key<'a>> {
    let mut best: Option<(Key<'a>, Interval)> = None;
    for id in ids {
        let Some(iv) = times.get(&id).copied() else {
            continue;
        };
        if best.is_none_or(|(k, b)| (iv.end, iv.order, id.1) > (b.end, b.order, k.1)) {
            best = Some((id, iv));
        }
    }
    best.map(|(id, _)| id)
}

#[cfg(test)]
#[path = "critical_tests.rs"]
mod tests;
