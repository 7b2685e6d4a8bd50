//! The resolved, immutable topology that the engine runs.
//!
//! Produced only by [`crate::validate`], so everything here is known to be
//! consistent: node ids are unique, edges point at nodes, the graph without
//! its loops' back edges is acyclic, conditions are compiled, defaults are
//! applied and prices are exact decimals. Adjacency, a topological order and
//! each loop's body are precomputed once, because every request walks them.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::condition::{Condition, Expr};
use crate::spec::TopologySpec;
use crate::typed_config::TypedConfig;

/// Index of a node in [`Topology::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct NodeId(pub usize);

/// Index of an edge in [`Topology::edges`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct EdgeId(pub usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    Cpu,
    Gpu,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Cpu => "cpu",
            ResourceKind::Gpu => "gpu",
        }
    }
}

/// Exact prices for one node, after merging the resource tag with the
/// topology's price table (the tag wins).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Prices {
    pub cost_per_call: Option<Decimal>,
    pub cost_per_1k_input_tokens: Option<Decimal>,
    pub cost_per_1k_output_tokens: Option<Decimal>,
    pub cost_per_cpu_ms: Option<Decimal>,
    /// Token classes priced apart from plain input and output (cached and
    /// cache-write prompt tokens, reasoning and audio tokens); `None`: the
    /// input or output price applies (`glassbox_trace::price`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_cached_input_tokens: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_cache_creation_tokens: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_reasoning_tokens: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_audio_input_tokens: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_1k_audio_output_tokens: Option<Decimal>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    pub kind: ResourceKind,
    pub model: Option<String>,
    pub prices: Prices,
}

/// A node, ready to be built by its kind.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub kind: String,
    pub description: Option<String>,
    pub resource: Resource,
    /// The kind's config as plain JSON (`{}` when absent).
    pub config: serde_json::Value,
    /// The config as the kind's check typed it, for its build step. `None`
    /// when the config holds secret references: those are resolved when the
    /// node is built, and the kind types the resolved copy then.
    pub typed_config: Option<TypedConfig>,
    pub timeout: Duration,
    pub retries: u32,
    pub backoff: Duration,
    pub fallback: Option<NodeId>,
    pub affinity: Option<String>,
    /// The node's response cache, when it has one.
    pub cache: Option<CachePolicy>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// True when the node only runs as another node's fallback.
    pub is_fallback: bool,
}

/// A node's response cache, resolved: repeated requests are served from
/// the node's earlier outputs for `ttl`, keeping at most `max_entries`.
#[derive(Debug, Clone)]
pub struct CachePolicy {
    pub ttl: Duration,
    pub max_entries: usize,
    pub similarity: Option<Similarity>,
}

/// Similarity matching: `text` (default `input.question`) is embedded by the
/// `embedding` node's model; a cached request whose text has at least
/// `threshold` cosine similarity is a hit.
#[derive(Clone)]
pub struct Similarity {
    pub embedding: NodeId,
    pub threshold: f64,
    pub text: Option<Expr>,
}

impl std::fmt::Debug for Similarity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Similarity")
            .field("embedding", &self.embedding)
            .field("threshold", &self.threshold)
            .field("text", &self.text.as_ref().map(|e| e.source.as_str()))
            .finish()
    }
}

/// Cache defaults when the node's `cache` does not set them.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(3600);
pub const DEFAULT_CACHE_ENTRIES: usize = 1000;

#[derive(Debug, Clone)]
pub struct Edge {
    pub from: NodeId,
    pub to: NodeId,
    pub condition: Option<Condition>,
    pub description: Option<String>,
    /// Set on a loop's back edge: the bound of the loop it closes.
    pub bound: Option<LoopBound>,
}

/// How far a loop may run: its body runs at most `max_iterations` times,
/// and no new iteration starts once a budget is spent.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopBound {
    pub max_iterations: u32,
    /// Tokens (input + output) of the body's nodes over all iterations.
    pub max_tokens: Option<u64>,
    /// Cost of the body's nodes over all iterations.
    pub max_cost: Option<Decimal>,
    /// Wall time since the first iteration began.
    pub max_time: Option<Duration>,
}

/// A bounded loop: back edge `edge` goes from `tail` back to `head`; the
/// body is every node on a path from `head` to `tail` (both included).
/// Bodies of different loops never share a node (the validator checks).
#[derive(Debug, Clone)]
pub struct Loop {
    pub edge: EdgeId,
    pub head: NodeId,
    pub tail: NodeId,
    /// In topological order (head first, tail last).
    pub body: Vec<NodeId>,
    pub bound: LoopBound,
}

/// A validated topology. Share it with `Arc`; it never changes.
#[derive(Debug, Clone)]
pub struct Topology {
    pub id: String,
    pub version: String,
    pub description: Option<String>,
    pub currency: String,
    /// Request deadline, if the topology sets one.
    pub deadline: Option<Duration>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The spec it was resolved from (for rendering, diffing, the API).
    pub spec: TopologySpec,
    /// Where it was loaded from (`<stdin>` for standard input).
    pub source_name: String,
    index: HashMap<String, NodeId>,
    incoming: Vec<Vec<EdgeId>>,
    outgoing: Vec<Vec<EdgeId>>,
    order: Vec<NodeId>,
    entries: Vec<NodeId>,
    loops: Vec<Loop>,
    /// The loop whose body holds each node, by node.
    loop_of: Vec<Option<usize>>,
}

/// Defaults when neither node nor topology sets them.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(100);
pub const DEFAULT_CURRENCY: &str = "USD";

/// The pieces [`Topology::new`] needs; built by the validator.
#[derive(Debug)]
pub(crate) struct Parts {
    pub id: String,
    pub version: String,
    pub description: Option<String>,
    pub currency: String,
    pub deadline: Option<Duration>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub spec: TopologySpec,
    pub source_name: String,
    /// A topological order of all nodes along forward edges (the validator
    /// has checked that every cycle goes through a back edge).
    pub order: Vec<NodeId>,
    pub loops: Vec<Loop>,
}

impl Topology {
    pub(crate) fn new(parts: Parts) -> Topology {
        let n = parts.nodes.len();
        let mut incoming = vec![Vec::new(); n];
        let mut outgoing = vec![Vec::new(); n];
        for (i, e) in parts.edges.iter().enumerate() {
            outgoing[e.from.0].push(EdgeId(i));
            incoming[e.to.0].push(EdgeId(i));
        }
        let index = parts
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| (node.id.clone(), NodeId(i)))
            .collect();
        // A back edge does not make its target wait: entries are the nodes
        // with no forward incoming edge.
        let entries = (0..n)
            .filter(|&i| {
                incoming[i]
                    .iter()
                    .all(|e: &EdgeId| parts.edges[e.0].bound.is_some())
                    && !parts.nodes[i].is_fallback
            })
            .map(NodeId)
            .collect();
        let mut loop_of = vec![None; n];
        for (k, l) in parts.loops.iter().enumerate() {
            for b in &l.body {
                loop_of[b.0] = Some(k);
            }
        }
        Topology {
            id: parts.id,
            version: parts.version,
            description: parts.description,
            currency: parts.currency,
            deadline: parts.deadline,
            nodes: parts.nodes,
            edges: parts.edges,
            metadata: parts.metadata,
            spec: parts.spec,
            source_name: parts.source_name,
            index,
            incoming,
            outgoing,
            order: parts.order,
            entries,
            loops: parts.loops,
            loop_of,
        }
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    pub fn edge(&self, id: EdgeId) -> &Edge {
        &self.edges[id.0]
    }

    /// Looks a node up by its string id.
    pub fn node_id(&self, id: &str) -> Option<NodeId> {
        self.index.get(id).copied()
    }

    pub fn incoming(&self, id: NodeId) -> &[EdgeId] {
        &self.incoming[id.0]
    }

    pub fn outgoing(&self, id: NodeId) -> &[EdgeId] {
        &self.outgoing[id.0]
    }

    /// The topology's bounded loops.
    pub fn loops(&self) -> &[Loop] {
        &self.loops
    }

    /// The loop whose body holds `n`, as an index into [`Topology::loops`].
    pub fn loop_of(&self, n: NodeId) -> Option<usize> {
        self.loop_of[n.0]
    }

    /// Whether `e` is a loop's back edge.
    pub fn is_back_edge(&self, e: EdgeId) -> bool {
        self.edges[e.0].bound.is_some()
    }

    /// Incoming edges that are not back edges: what a node waits for.
    pub fn forward_incoming(&self, id: NodeId) -> impl Iterator<Item = EdgeId> + '_ {
        self.incoming[id.0]
            .iter()
            .copied()
            .filter(|&e| !self.is_back_edge(e))
    }

    /// Nodes with no forward incoming edge (fallback-only nodes excluded).
    pub fn entries(&self) -> &[NodeId] {
        &self.entries
    }

    /// All nodes in a topological order (every edge but a back edge goes
    /// forward).
    pub fn topological_order(&self) -> &[NodeId] {
        &self.order
    }

    /// Nodes without outgoing edges (a back edge aside) that are not
    /// fallbacks: where a path ends.
    pub fn exits(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len())
            .filter(|&i| {
                self.outgoing[i].iter().all(|&e| self.is_back_edge(e)) && !self.nodes[i].is_fallback
            })
            .map(NodeId)
    }

    /// Resolves a path written in the topology (an index, a model file):
    /// relative paths are relative to the topology file's directory, so a
    /// topology and its data can move together.
    pub fn resolve_path(&self, path: &str) -> std::path::PathBuf {
        let p = std::path::Path::new(path);
        if p.is_absolute() || self.source_name.starts_with('<') {
            return p.to_path_buf();
        }
        match std::path::Path::new(&self.source_name).parent() {
            Some(dir) => dir.join(p),
            None => p.to_path_buf(),
        }
    }

    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.nodes.len()).map(NodeId)
    }

    /// Every node that can run after `start` (not `start` itself): along
    /// edges, and into fallbacks, since a fallback runs in its node's place
    /// and what follows the node follows the fallback too.
    pub fn downstream(&self, start: NodeId) -> HashSet<NodeId> {
        let mut seen = HashSet::new();
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for e in self.outgoing(n) {
                let to = self.edge(*e).to;
                if seen.insert(to) {
                    stack.push(to);
                }
            }
            if let Some(fb) = self.node(n).fallback
                && seen.insert(fb)
            {
                stack.push(fb);
            }
        }
        seen
    }
}
