//! Loop checks: every edge with a `loop` bound goes back (its target leads
//! to its source along forward edges, or it is a self-loop), and loops do
//! not share nodes. Resolves each loop's body, in topological order.
//!
//! Why bodies may not overlap: a node in two loops would need two
//! iteration counters and an order in which the loops re-run it; one loop
//! whose body holds both covers the same ground and stays explainable.

use std::collections::VecDeque;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{EdgeId, Loop, NodeId};

use super::{CheckedEdge, Checker};

/// Nodes reachable from `start` (included) along `adj`.
fn reach(start: usize, adj: &[Vec<usize>]) -> Vec<bool> {
    let mut seen = vec![false; adj.len()];
    seen[start] = true;
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        for &v in &adj[u] {
            if !seen[v] {
                seen[v] = true;
                queue.push_back(v);
            }
        }
    }
    seen
}

impl Checker<'_> {
    /// Checks the back edges; returns the loops (empty when the forward
    /// graph has a cycle, which `check_graph` reported).
    pub(super) fn check_loops(
        &mut self,
        edges: &[CheckedEdge],
        order: Option<&[NodeId]>,
    ) -> Vec<Loop> {
        let n = self.spec.nodes.len();
        let mut fwd: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut rev: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in edges.iter().filter(|e| e.bound.is_none()) {
            fwd[e.from.0].push(e.to.0);
            rev[e.to.0].push(e.from.0);
        }
        let mut loops: Vec<Loop> = Vec::new();
        let mut owner: Vec<Option<usize>> = vec![None; n];
        for (k, e) in edges.iter().enumerate() {
            let Some(bound) = &e.bound else { continue };
            let name = |i: NodeId| self.spec.nodes[i.0].id.value.clone();
            let (head, tail) = (e.to, e.from);
            let from_head = reach(head.0, &fwd);
            if !from_head[tail.0] {
                let d = Diagnostic::error(
                    Code::InvalidValue,
                    e.bound_span.unwrap_or(e.span),
                    format!(
                        "edge `{}` → `{}` has a `loop` bound but closes no loop: `{}` does not lead back to `{}`",
                        name(tail),
                        name(head),
                        name(head),
                        name(tail)
                    ),
                )
                .at(format!("edges[{}].loop", e.spec_index))
                .hint("a `loop` bound belongs on the edge that goes back to an earlier node; remove `loop:` from this edge");
                self.push(d);
                continue;
            }
            let to_tail = reach(tail.0, &rev);
            let Some(order) = order else { continue };
            let body: Vec<NodeId> = order
                .iter()
                .copied()
                .filter(|b| from_head[b.0] && to_tail[b.0])
                .collect();
            let index = loops.len();
            let mut clash = None;
            for b in &body {
                match owner[b.0] {
                    Some(other) if clash.is_none() => clash = Some((other, *b)),
                    Some(_) => {}
                    None => owner[b.0] = Some(index),
                }
            }
            if let Some((other, shared)) = clash {
                let first = &loops[other];
                let first_edge = &edges[first.edge.0];
                let d = Diagnostic::error(
                    Code::InvalidValue,
                    e.bound_span.unwrap_or(e.span),
                    format!(
                        "the loops closed by `{}` → `{}` and `{}` → `{}` share node `{}`",
                        name(first.tail),
                        name(first.head),
                        name(tail),
                        name(head),
                        name(shared)
                    ),
                )
                .at(format!("edges[{}].loop", e.spec_index))
                .related(first_edge.span, "the other loop's back edge")
                .hint("nested or overlapping loops are not supported: make one loop whose body holds both, or give each loop its own nodes");
                self.push(d);
                continue;
            }
            loops.push(Loop {
                edge: EdgeId(k),
                head,
                tail,
                body,
                bound: bound.clone(),
            });
        }
        loops
    }
}
