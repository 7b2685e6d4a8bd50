//! One request's run state: where each node is, how each edge resolved and
//! why, and which nodes are ready to dispatch.
//!
//! Plain vectors indexed by `NodeId` / `EdgeId`, owned by the executor while
//! the request runs and read once more when its trace is assembled. The
//! rules that move the state (DESIGN.md, "Execution semantics") live here as
//! methods, so the executor only decides *when* to apply them: a node is
//! ready when every incoming edge is resolved; it runs if any incoming edge
//! was taken, else it is skipped and its outgoing edges die too. A loop's
//! back edge does not make its target wait; when it is taken the loop's
//! body is reset for another iteration, and edges leaving the body are
//! held until the loop ends (`crate::loops`).

use std::borrow::Cow;

use glassbox_topology::{EdgeId, NodeId, Topology};
use glassbox_trace::{Fact, LoopStop};

use crate::loops::LoopState;

/// Where a node is in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeProgress {
    Waiting,
    Running,
    Succeeded,
    /// Failed, and its fallback stood in.
    FellBack,
    Skipped,
    Failed,
}

/// One node's state in this request.
pub(crate) struct NodeState {
    /// Incoming edges not yet resolved; the node is ready at zero.
    pub unresolved_inputs: u32,
    /// Whether any incoming edge was taken (if none was, the node is skipped).
    pub any_input_taken: bool,
    pub progress: NodeProgress,
    /// Facts the engine adds for this node (retries, fallback, re-runs).
    pub engine_facts: Vec<Fact>,
    /// The fallback that ran for this node, if one did.
    pub fallback: Option<NodeId>,
}

/// One edge's state in this request.
pub(crate) struct EdgeState {
    pub resolved: bool,
    pub taken: bool,
    /// Why the edge was (not) taken, in words, for the path record.
    pub why: Cow<'static, str>,
}

/// Every node's and edge's state, and the ready nodes not yet dispatched.
pub(crate) struct RunState {
    pub nodes: Vec<NodeState>,
    pub edges: Vec<EdgeState>,
    /// Ready nodes, popped from the end (entries start in topology order).
    pub ready: Vec<NodeId>,
    /// Each loop of the topology (same order as `Topology::loops`).
    pub loops: Vec<LoopState>,
}

impl RunState {
    /// Nothing resolved yet; the entry nodes are ready.
    pub fn new(topology: &Topology) -> RunState {
        let nodes = (0..topology.nodes.len())
            .map(|i| NodeState {
                unresolved_inputs: u32::try_from(topology.forward_incoming(NodeId(i)).count())
                    .unwrap_or(u32::MAX),
                any_input_taken: false,
                progress: NodeProgress::Waiting,
                engine_facts: Vec::new(),
                fallback: None,
            })
            .collect();
        let edges = (0..topology.edges.len())
            .map(|_| EdgeState {
                resolved: false,
                taken: false,
                why: Cow::Borrowed(""),
            })
            .collect();
        RunState {
            nodes,
            edges,
            ready: topology.entries().iter().rev().copied().collect(),
            loops: topology
                .loops()
                .iter()
                .map(|_| LoopState::default())
                .collect(),
        }
    }

    /// Whether a ready node runs: an entry node always does, any other node
    /// when at least one of its incoming edges was taken.
    pub fn should_run(&self, topology: &Topology, n: NodeId) -> bool {
        topology.forward_incoming(n).next().is_none() || self.nodes[n.0].any_input_taken
    }

    /// Skips a ready node that will not run; its outgoing edges die. A
    /// skipped back edge ends its loop, saying why its source did not run.
    pub fn skip(&mut self, topology: &Topology, n: NodeId) {
        self.nodes[n.0].progress = NodeProgress::Skipped;
        for &e in topology.outgoing(n) {
            if topology.is_back_edge(e) {
                let why: Vec<String> = topology
                    .forward_incoming(n)
                    .map(|i| self.edges[i.0].why.to_string())
                    .collect();
                let name = &topology.node(n).id;
                let why = format!("{name} did not run ({})", why.join("; "));
                let stop = LoopStop::Condition { why: why.clone() };
                self.resolve_back(topology, e, false, Cow::Owned(why), Some(stop));
            } else {
                self.resolve(topology, e, false, Cow::Borrowed("source skipped"));
            }
        }
    }

    /// Resolves a forward edge; its target becomes ready once all its
    /// inputs are. An edge leaving a loop's body is held (resolved, but
    /// its target not told) until the loop ends.
    pub fn resolve(&mut self, topology: &Topology, e: EdgeId, taken: bool, why: Cow<'static, str>) {
        let edge = &mut self.edges[e.0];
        edge.resolved = true;
        edge.taken = taken;
        edge.why = why;
        let (from, to) = (topology.edge(e).from, topology.edge(e).to);
        if let Some(l) = topology.loop_of(from)
            && topology.loop_of(to) != Some(l)
        {
            return;
        }
        self.tell_target(topology, e);
    }

    /// Resolves a loop's back edge: taken, the body runs again; not taken
    /// (`stop` says why), the loop ends and its held edges resolve.
    pub fn resolve_back(
        &mut self,
        topology: &Topology,
        e: EdgeId,
        taken: bool,
        why: Cow<'static, str>,
        stop: Option<LoopStop>,
    ) {
        let edge = &mut self.edges[e.0];
        edge.resolved = true;
        edge.taken = taken;
        edge.why = why;
        let Some(l) = topology.loops().iter().position(|l| l.edge == e) else {
            return;
        };
        let lp = &topology.loops()[l];
        if taken {
            self.loops[l].next();
            for &b in &lp.body {
                let mut inner = 0u32;
                let mut outer_taken = false;
                for i in topology.forward_incoming(b) {
                    if topology.loop_of(topology.edge(i).from) == Some(l) {
                        inner += 1;
                        let ie = &mut self.edges[i.0];
                        ie.resolved = false;
                        ie.taken = false;
                    } else {
                        outer_taken |= self.edges[i.0].taken;
                    }
                }
                let state = &mut self.nodes[b.0];
                state.progress = NodeProgress::Waiting;
                state.unresolved_inputs = inner;
                state.any_input_taken = outer_taken || b == lp.head;
            }
            self.ready.push(lp.head);
            return;
        }
        self.loops[l].stopped = stop;
        // The loop is over: the edges leaving its body resolve as they did
        // in its last iteration.
        for &b in &lp.body {
            for &x in topology.outgoing(b) {
                let to = topology.edge(x).to;
                if !topology.is_back_edge(x) && topology.loop_of(to) != Some(l) {
                    self.tell_target(topology, x);
                }
            }
        }
    }

    /// Tells an edge's target that the edge resolved.
    fn tell_target(&mut self, topology: &Topology, e: EdgeId) {
        let taken = self.edges[e.0].taken;
        let to = topology.edge(e).to;
        let target = &mut self.nodes[to.0];
        target.unresolved_inputs = target.unresolved_inputs.saturating_sub(1);
        target.any_input_taken |= taken;
        if target.unresolved_inputs == 0 {
            self.ready.push(to);
        }
    }

    /// Records how a node's run ended: the fallback that ran and the engine's
    /// facts about it.
    pub fn finish_node(
        &mut self,
        n: NodeId,
        progress: NodeProgress,
        fallback: Option<NodeId>,
        facts: Vec<Fact>,
    ) {
        let state = &mut self.nodes[n.0];
        state.progress = progress;
        state.fallback = fallback;
        state.engine_facts = facts;
    }

    /// Marks a failed node's outgoing edges resolved (not taken). Their
    /// targets are not queued: the failure ends the request.
    pub fn fail_outgoing(&mut self, topology: &Topology, n: NodeId) {
        for &e in topology.outgoing(n) {
            let edge = &mut self.edges[e.0];
            edge.resolved = true;
            edge.why = Cow::Borrowed("source failed");
        }
    }
}
