//! One request's run state: where each node is, how each edge resolved and
//! why, and which nodes are ready to dispatch.
//!
//! Plain vectors indexed by `NodeId` / `EdgeId`, owned by the executor while
//! the request runs and read once more when its trace is assembled. The
//! rules that move the state (DESIGN.md, "Execution semantics") live here as
//! methods, so the executor only decides *when* to apply them: a node is
//! ready when every incoming edge is resolved; it runs if any incoming edge
//! was taken, else it is skipped and its outgoing edges die too.

use std::borrow::Cow;

use glassbox_topology::{EdgeId, NodeId, Topology};
use glassbox_trace::Fact;

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
}

impl RunState {
    /// Nothing resolved yet; the entry nodes are ready.
    pub fn new(topology: &Topology) -> RunState {
        let nodes = (0..topology.nodes.len())
            .map(|i| NodeState {
                unresolved_inputs: u32::try_from(topology.incoming(NodeId(i)).len())
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
        }
    }

    /// Whether a ready node runs: an entry node always does, any other node
    /// when at least one of its incoming edges was taken.
    pub fn should_run(&self, topology: &Topology, n: NodeId) -> bool {
        topology.incoming(n).is_empty() || self.nodes[n.0].any_input_taken
    }

    /// Skips a ready node that will not run; its outgoing edges die.
    pub fn skip(&mut self, topology: &Topology, n: NodeId) {
        self.nodes[n.0].progress = NodeProgress::Skipped;
        for &e in topology.outgoing(n) {
            self.resolve(topology, e, false, Cow::Borrowed("source skipped"));
        }
    }

    /// Resolves an edge; its target becomes ready once all its inputs are.
    pub fn resolve(&mut self, topology: &Topology, e: EdgeId, taken: bool, why: Cow<'static, str>) {
        let edge = &mut self.edges[e.0];
        edge.resolved = true;
        edge.taken = taken;
        edge.why = why;
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
