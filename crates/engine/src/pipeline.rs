//! A built [`Pipeline`]: the shared topology plus one runnable node per
//! topology node, and everything a request needs precomputed once (node id
//! strings, retry policies, edge conditions), so running a request never
//! clones or re-walks the topology.

use crate::stream::TokenSink;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use glassbox_topology::{Condition, Expr, Topology};
use glassbox_trace::{Lang, NoopSink, RequestId, TraceSink};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cpu::CpuClock;
use crate::error::{BuildError, NodeBuildError, PipelineError};
use crate::executor::{self, Outcome};
use crate::kind::{BuildContext, Registry};
use crate::node::Node;
use crate::retry::RetryPolicy;

/// How a pipeline records and labels its work.
#[derive(Clone)]
pub struct PipelineOptions {
    /// Where spans and request records go as they finish.
    pub sink: Arc<dyn TraceSink>,
    /// Name of this worker in spans.
    pub worker: Arc<str>,
    /// Longest input/output summary kept in traces (0: none).
    pub summary_chars: usize,
    /// How inline calls and async polls are timed for CPU billing.
    pub cpu_clock: CpuClock,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            sink: Arc::new(NoopSink),
            worker: "local".into(),
            summary_chars: 200,
            cpu_clock: CpuClock::default(),
        }
    }
}

/// Per-request options.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Use this id instead of a fresh one.
    pub request_id: Option<RequestId>,
    /// Overrides the topology's `deadline_ms`.
    pub deadline: Option<Duration>,
    /// Cancels the request when triggered (dropping the future works too).
    pub cancel: Option<CancellationToken>,
    /// Language of the explanation.
    pub lang: Lang,
    /// Receives generated text as nodes produce it (token streaming).
    pub tokens: Option<TokenSink>,
}

/// An edge's condition, ready to evaluate.
pub(crate) enum EdgeCond {
    Always,
    /// Compared as a string: no CEL on the hot path for bare labels.
    Label(Arc<str>),
    /// A CEL expression and the dotted paths it reads (for the "why").
    Expr {
        expr: Expr,
        reads: Vec<String>,
    },
}

pub(crate) struct Inner {
    pub topology: Arc<Topology>,
    pub nodes: Vec<Arc<dyn Node>>,
    pub ids: Arc<[Arc<str>]>,
    pub kinds: Arc<[Arc<str>]>,
    pub retry: Vec<RetryPolicy>,
    pub conds: Vec<EdgeCond>,
    pub cond_text: Vec<Option<Arc<str>>>,
    pub options: PipelineOptions,
}

/// A topology with its nodes built, ready to run requests. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("topology", &self.inner.topology.id)
            .field("version", &self.inner.topology.version)
            .finish()
    }
}

/// The node with the secret references of its config (`${env:NAME}`,
/// `${file:/path}`) resolved, for its kind to build from. The copy lives
/// only as long as the build: the topology keeps the references.
fn with_secrets(
    node: &glassbox_topology::Node,
) -> Result<Cow<'_, glassbox_topology::Node>, BuildError> {
    if !contains_reference(&node.config) {
        return Ok(Cow::Borrowed(node));
    }
    let mut resolved = node.clone();
    resolved.config = glassbox_topology::secret::resolve(&node.config, "config")?;
    Ok(Cow::Owned(resolved))
}

fn contains_reference(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => glassbox_topology::secret::has_reference(s),
        serde_json::Value::Array(a) => a.iter().any(contains_reference),
        serde_json::Value::Object(m) => m.values().any(contains_reference),
        _ => false,
    }
}

impl Pipeline {
    /// Builds every node with its registered kind. Reports every node that
    /// fails to build, not just the first.
    pub fn build(
        topology: Arc<Topology>,
        registry: &Registry,
        cx: &BuildContext,
        options: PipelineOptions,
    ) -> Result<Pipeline, PipelineError> {
        let mut nodes = Vec::with_capacity(topology.nodes.len());
        let mut errors = Vec::new();
        for node in &topology.nodes {
            let built = match registry.get(&node.kind) {
                Some(kind) => with_secrets(node).and_then(|n| kind.build(&n, cx)),
                None => Err(BuildError::UnknownKind {
                    kind: node.kind.clone(),
                }),
            };
            match built {
                Ok(n) => nodes.push(n),
                Err(error) => errors.push(NodeBuildError {
                    node: node.id.clone(),
                    kind: node.kind.clone(),
                    error,
                }),
            }
        }
        if !errors.is_empty() {
            return Err(PipelineError { errors });
        }
        Ok(Pipeline::from_nodes(topology, nodes, options))
    }

    /// Assembles a pipeline from nodes built elsewhere, one per topology
    /// node in order (tests, embedding applications).
    pub fn from_nodes(
        topology: Arc<Topology>,
        nodes: Vec<Arc<dyn Node>>,
        options: PipelineOptions,
    ) -> Pipeline {
        let ids: Arc<[Arc<str>]> = topology
            .nodes
            .iter()
            .map(|n| Arc::from(n.id.as_str()))
            .collect();
        let kinds: Arc<[Arc<str>]> = topology
            .nodes
            .iter()
            .map(|n| Arc::from(n.kind.as_str()))
            .collect();
        let retry = topology
            .nodes
            .iter()
            .map(|n| RetryPolicy::new(n.retries, n.backoff))
            .collect();
        let conds = topology
            .edges
            .iter()
            .map(|e| match &e.condition {
                None => EdgeCond::Always,
                Some(Condition::Label(l)) => EdgeCond::Label(Arc::from(l.as_str())),
                Some(Condition::Expr(x)) => EdgeCond::Expr {
                    expr: x.clone(),
                    reads: x.read_paths(),
                },
            })
            .collect();
        let cond_text = topology
            .edges
            .iter()
            .map(|e| e.condition.as_ref().map(|c| Arc::from(c.as_str())))
            .collect();
        Pipeline {
            inner: Arc::new(Inner {
                topology,
                nodes,
                ids,
                kinds,
                retry,
                conds,
                cond_text,
                options,
            }),
        }
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.inner.topology
    }

    pub fn options(&self) -> &PipelineOptions {
        &self.inner.options
    }

    /// Runs one request to completion. Always returns a complete trace; the
    /// result is the output or an error naming node, attempt and cause.
    /// Dropping the future cancels the request and still records its trace
    /// (status `cancelled`) to the sink.
    pub async fn run(&self, input: Value, options: RunOptions) -> Outcome {
        executor::execute(&self.inner, input, options).await
    }
}
