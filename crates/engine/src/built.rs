//! A [`BuiltPipeline`]: what every request of one pipeline shares, computed
//! once at build — the topology, one runnable node per topology node, node
//! ids and kinds as shared strings, retry policies and edge conditions ready
//! to evaluate — so running a request never clones or re-walks the topology.

use std::sync::Arc;

use glassbox_topology::{Condition, Expr, Topology};

use crate::cache::NodeCache;
use crate::node::Node;
use crate::options::PipelineOptions;
use crate::retry::RetryPolicy;

/// An edge's condition, ready to evaluate.
pub(crate) enum EdgeCondition {
    Always,
    /// Compared as a string: no CEL on the hot path for bare labels.
    Label(Arc<str>),
    /// A CEL expression and the dotted paths it reads (for the "why").
    Expr {
        expr: Expr,
        reads: Vec<String>,
    },
}

/// The topology with its nodes built, and per-node / per-edge tables indexed
/// by `NodeId` / `EdgeId`.
pub(crate) struct BuiltPipeline {
    pub topology: Arc<Topology>,
    /// One runnable node per topology node, in topology order.
    pub nodes: Vec<Arc<dyn Node>>,
    /// Node ids as shared strings (spans and records bump a count).
    pub node_ids: Arc<[Arc<str>]>,
    /// Node kinds as shared strings.
    pub node_kinds: Arc<[Arc<str>]>,
    pub retry_policies: Vec<RetryPolicy>,
    /// Each node's response cache (`None` without `cache:`).
    pub caches: Vec<Option<Arc<NodeCache>>>,
    pub edge_conditions: Vec<EdgeCondition>,
    /// Each edge's condition as written (for the path record).
    pub condition_texts: Vec<Option<Arc<str>>>,
    pub options: PipelineOptions,
}

impl BuiltPipeline {
    /// Precomputes the tables for `nodes`, one per topology node in order.
    pub fn new(
        topology: Arc<Topology>,
        nodes: Vec<Arc<dyn Node>>,
        options: PipelineOptions,
    ) -> BuiltPipeline {
        let node_ids = topology
            .nodes
            .iter()
            .map(|n| Arc::from(n.id.as_str()))
            .collect();
        let node_kinds = topology
            .nodes
            .iter()
            .map(|n| Arc::from(n.kind.as_str()))
            .collect();
        let retry_policies = topology
            .nodes
            .iter()
            .map(|n| RetryPolicy::new(n.retries, n.backoff))
            .collect();
        let caches = topology
            .node_ids()
            .map(|n| NodeCache::for_node(&topology, n).map(Arc::new))
            .collect();
        let edge_conditions = topology
            .edges
            .iter()
            .map(|e| match &e.condition {
                None => EdgeCondition::Always,
                Some(Condition::Label(l)) => EdgeCondition::Label(Arc::from(l.as_str())),
                Some(Condition::Expr(x)) => EdgeCondition::Expr {
                    expr: x.clone(),
                    reads: x.read_paths(),
                },
            })
            .collect();
        let condition_texts = topology
            .edges
            .iter()
            .map(|e| e.condition.as_ref().map(|c| Arc::from(c.as_str())))
            .collect();
        BuiltPipeline {
            topology,
            nodes,
            node_ids,
            node_kinds,
            retry_policies,
            caches,
            edge_conditions,
            condition_texts,
            options,
        }
    }
}
