//! Graph checks over the edges whose ends exist: one entry, no cycle that
//! does not go through a loop's back edge (each reported once, with its
//! path), every node reachable.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::diagnostic::{Code, Diagnostic};
use crate::model::NodeId;
use crate::source::Span;

use super::{CheckedEdge, Checker, node_path};

impl Checker<'_> {
    /// Cycles, entry nodes and reachability. Returns a topological order.
    pub(super) fn check_graph(
        &mut self,
        index: &HashMap<String, NodeId>,
        edges: &[CheckedEdge],
        fallbacks: &[Option<NodeId>],
    ) -> Option<Vec<NodeId>> {
        let nodes = &self.spec.nodes;
        let n = nodes.len();
        // Forward edges only: a loop's back edge is allowed to close a cycle
        // (its bound is checked in `loops`), and its target does not wait
        // for it.
        let mut out_adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut indeg = vec![0usize; n];
        let mut any_in = vec![false; n];
        let mut back_out: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (k, e) in edges.iter().enumerate() {
            any_in[e.to.0] = true;
            if e.bound.is_some() {
                back_out[e.from.0].push(k);
                continue;
            }
            out_adj[e.from.0].push(k);
            indeg[e.to.0] += 1;
        }
        let is_fallback: Vec<bool> = {
            let mut v = vec![false; n];
            for t in fallbacks.iter().flatten() {
                v[t.0] = true;
            }
            v
        };
        // Fallback nodes stand in for another node; edges of their own would
        // make the degraded path ambiguous.
        for (i, node) in nodes.iter().enumerate() {
            if is_fallback[i]
                && (any_in[i] || !out_adj[i].is_empty() || !back_out[i].is_empty())
                && index.get(&node.id.value) == Some(&NodeId(i))
            {
                self.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        node.id.span,
                        format!("node `{}` is used as a fallback but also has edges", node.id.value),
                    )
                    .at(node_path(node, "id"))
                    .hint("a fallback replaces the failed node and inherits its edges; remove this node's own edges"),
                );
            }
        }

        // Kahn's algorithm; whatever is left over lies on or behind a cycle.
        let mut deg = indeg.clone();
        let mut queue: VecDeque<usize> = (0..n).filter(|&i| deg[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(u) = queue.pop_front() {
            order.push(NodeId(u));
            for &k in &out_adj[u] {
                let v = edges[k].to.0;
                deg[v] -= 1;
                if deg[v] == 0 {
                    queue.push_back(v);
                }
            }
        }
        let acyclic = order.len() == n;
        if !acyclic {
            self.report_cycles(edges, &out_adj, &deg);
        }

        let entries: Vec<usize> = (0..n)
            .filter(|&i| indeg[i] == 0 && !is_fallback[i])
            .collect();
        if entries.is_empty() && n > 0 {
            let span = self
                .spec
                .nodes
                .first()
                .map_or(Span::default(), |nd| nd.span);
            self.push(
                Diagnostic::error(Code::NoEntry, span, "no entry node: every node has an incoming edge")
                    .at("nodes")
                    .hint("a request starts at the nodes without incoming edges; remove the edge into the first node"),
            );
        } else {
            let mut reached = vec![false; n];
            let mut queue: VecDeque<usize> = entries.iter().copied().collect();
            for &e in &entries {
                reached[e] = true;
            }
            while let Some(u) = queue.pop_front() {
                let next = out_adj[u]
                    .iter()
                    .chain(&back_out[u])
                    .map(|&k| edges[k].to.0)
                    .chain(fallbacks[u].map(|f| f.0));
                for v in next {
                    if !reached[v] {
                        reached[v] = true;
                        queue.push_back(v);
                    }
                }
            }
            for (i, node) in nodes.iter().enumerate() {
                if !reached[i] && !node.id.value.is_empty() {
                    self.push(
                        Diagnostic::error(
                            Code::Unreachable,
                            node.id.span,
                            format!(
                                "node `{}` cannot be reached from any entry node",
                                node.id.value
                            ),
                        )
                        .at(node_path(node, "id"))
                        .hint("connect it with an edge, use it as a `fallback`, or remove it"),
                    );
                }
            }
        }
        acyclic.then_some(order)
    }

    /// Reports each elementary cycle found by a DFS over the nodes Kahn's
    /// algorithm could not order, naming the cycle.
    pub(super) fn report_cycles(
        &mut self,
        edges: &[CheckedEdge],
        out_adj: &[Vec<usize>],
        deg: &[usize],
    ) {
        let n = out_adj.len();
        let mut color = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        let mut reported: HashSet<Vec<usize>> = HashSet::new();
        for start in (0..n).filter(|&i| deg[i] > 0) {
            if color[start] != 0 {
                continue;
            }
            // Explicit stack of (node, next edge position); path holds (node, edge used to enter).
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            let mut path: Vec<(usize, Option<usize>)> = vec![(start, None)];
            color[start] = 1;
            while let Some(&mut (u, ref mut pos)) = stack.last_mut() {
                if let Some(&k) = out_adj[u].get(*pos) {
                    *pos += 1;
                    let v = edges[k].to.0;
                    if color[v] == 0 {
                        color[v] = 1;
                        stack.push((v, 0));
                        path.push((v, Some(k)));
                    } else if color[v] == 1 {
                        let at = path.iter().position(|&(w, _)| w == v).unwrap_or(0);
                        let mut ring: Vec<usize> = path[at..].iter().map(|&(w, _)| w).collect();
                        let mut key = ring.clone();
                        key.sort_unstable();
                        if reported.insert(key) {
                            ring.push(v);
                            let names: Vec<&str> = ring
                                .iter()
                                .map(|&w| self.spec.nodes[w].id.value.as_str())
                                .collect();
                            let closing = &edges[k];
                            self.push(
                                Diagnostic::error(
                                    Code::Cycle,
                                    closing.span,
                                    format!("edges form a cycle: {}", names.join(" → ")),
                                )
                                .at(format!("edges[{}]", closing.spec_index))
                                .hint("a request must end, so a cycle needs a bound: give the edge that goes back a `loop: {max_iterations: 3}` (and optional `max_tokens`, `max_cost`, `max_time_ms`), or remove one edge of the cycle"),
                            );
                        }
                    }
                } else {
                    color[u] = 2;
                    stack.pop();
                    path.pop();
                }
            }
        }
    }
}
