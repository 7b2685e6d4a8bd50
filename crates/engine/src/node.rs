//! The [`Node`] trait: what a built node does for one request.
//!
//! A call returns a [`Call`] saying *how* its work runs, so the engine can
//! keep the async reactor free:
//! - [`Call::Ready`]: the work was cheap and is already done (a label
//!   comparison, a short template). No task hop, no timer.
//! - [`Call::Blocking`]: CPU-heavy work, run on the blocking thread pool so a
//!   slow node never stalls other requests (the seeds' GIL lesson).
//! - [`Call::Future`]: I/O (HTTP, a model server), awaited with a timeout.
//!
//! The engine measures thread CPU time in all three (inside the closure on the
//! pool thread; per poll for futures), and wall time for all.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use glassbox_topology::NodeId;
use serde_json::{Map, Value};

use crate::error::NodeError;
pub use crate::output::{NodeOutput, Tokens, text_of};
use crate::request::RequestShared;
use crate::stream::TokenStream;

/// What a node call returns.
pub type NodeResult = Result<NodeOutput, NodeError>;

/// An I/O-bound node call in progress.
pub type NodeFuture = Pin<Box<dyn Future<Output = NodeResult> + Send + 'static>>;

/// How a node call's work runs; see the module docs.
pub enum Call {
    Ready(NodeResult),
    Blocking(Box<dyn FnOnce() -> NodeResult + Send + 'static>),
    Future(NodeFuture),
}

impl Call {
    /// CPU work for the blocking pool.
    pub fn blocking(f: impl FnOnce() -> NodeResult + Send + 'static) -> Call {
        Call::Blocking(Box::new(f))
    }

    /// I/O work.
    pub fn future(f: impl Future<Output = NodeResult> + Send + 'static) -> Call {
        Call::Future(Box::pin(f))
    }
}

impl From<NodeResult> for Call {
    fn from(r: NodeResult) -> Call {
        Call::Ready(r)
    }
}

/// A node built from its topology entry, shared by every request.
pub trait Node: Send + Sync + 'static {
    /// Does the node's work for one attempt. Must not block: cheap work may
    /// return [`Call::Ready`]; anything heavier returns [`Call::Blocking`] or
    /// [`Call::Future`].
    fn call(&self, cx: NodeCx) -> Call;

    /// What this node's answer depends on, for its response cache's key
    /// (e.g. an LLM's rendered messages). `None`, the default: the request
    /// input and the outputs and labels of every node upstream, which is
    /// always safe but counts two requests that differ anywhere upstream as
    /// different. Called only for nodes with `cache:`; must be cheap.
    fn cache_input(&self, cx: &NodeCx) -> Option<Value> {
        let _ = cx;
        None
    }

    /// Turns `text` into a vector with the node's model, for response-cache
    /// similarity lookups; `None` when the node does not embed. Runs on the
    /// blocking pool.
    fn embed(&self, text: &str) -> Option<Result<Vec<f32>, NodeError>> {
        let _ = text;
        None
    }
}

/// What a node sees of the request: the input, finished nodes' outputs and
/// labels. Cheap to clone and `'static`, so blocking and async work can keep it.
#[derive(Clone)]
pub struct NodeCx {
    pub(crate) req: Arc<RequestShared>,
    /// The node being run (a fallback runs as itself).
    pub(crate) node: NodeId,
    pub(crate) attempt: u32,
    /// How many times this node had its upstream re-run so far.
    pub(crate) reruns: u32,
    /// Sources of this node's active incoming edges (for a fallback: those
    /// of the node it replaces).
    pub(crate) sources: Arc<[NodeId]>,
    /// Shared with the attempt's span guard.
    pub(crate) cell: Arc<AttemptCell>,
}

/// What a running attempt and the engine tell each other: the worker the
/// node placed its work on (for the span), and whether the engine still
/// waits for the attempt.
#[derive(Debug, Default)]
pub(crate) struct AttemptCell {
    worker: Mutex<Option<Arc<str>>>,
    /// Steps the node told as they finished ([`NodeCx::step_done`]): the
    /// trace keeps them when the attempt ends without an output.
    steps: Mutex<Vec<crate::output::Step>>,
    over: AtomicBool,
    /// When the engine stops waiting at the latest: the node's timeout
    /// or the request's deadline, whichever comes first.
    ends_at: Option<tokio::time::Instant>,
}

impl AttemptCell {
    pub fn until(ends_at: Option<tokio::time::Instant>) -> AttemptCell {
        AttemptCell {
            ends_at,
            ..AttemptCell::default()
        }
    }

    pub fn worker(&self) -> Option<Arc<str>> {
        self.worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn end(&self) {
        self.over.store(true, Ordering::Relaxed);
    }

    /// The steps told so far (taken: told once).
    pub fn take_steps(&self) -> Vec<crate::output::Step> {
        std::mem::take(&mut *self.steps.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl NodeCx {
    /// The topology entry of the node being run.
    pub fn node(&self) -> &glassbox_topology::Node {
        self.req.topology.node(self.node)
    }

    pub fn node_id(&self) -> NodeId {
        self.node
    }

    /// 1 for the first attempt.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Upstream re-runs this node has asked for so far in this request.
    pub fn reruns(&self) -> u32 {
        self.reruns
    }

    pub fn topology(&self) -> &glassbox_topology::Topology {
        &self.req.topology
    }

    pub fn request_id(&self) -> glassbox_trace::RequestId {
        self.req.request_id
    }

    /// The request input.
    pub fn input(&self) -> &Value {
        &self.req.input
    }

    /// A finished node's output, by string id.
    pub fn output(&self, id: &str) -> Option<Arc<NodeOutput>> {
        self.req
            .topology
            .node_id(id)
            .and_then(|n| self.req.output(n))
    }

    /// Outputs of the nodes whose edges into this node are active, in edge
    /// order, with their ids.
    pub fn upstream(&self) -> Vec<(&str, Arc<NodeOutput>)> {
        self.sources
            .iter()
            .filter_map(|&n| {
                self.req
                    .output(n)
                    .map(|o| (self.req.topology.node(n).id.as_str(), o))
            })
            .collect()
    }

    /// The first active upstream node's id and output.
    pub fn primary_upstream(&self) -> Option<(&str, Arc<NodeOutput>)> {
        self.sources.iter().find_map(|&n| {
            self.req
                .output(n)
                .map(|o| (self.req.topology.node(n).id.as_str(), o))
        })
    }

    /// Every finished node's output value by id, as CEL and templates read
    /// them (`outputs.<id>`). Copies values: call once per attempt.
    pub fn outputs_json(&self) -> Map<String, Value> {
        self.req.outputs_json()
    }

    /// Where to send generated text as it is produced, when the caller
    /// streams (see [`RunOptions::tokens`](crate::RunOptions::tokens)).
    /// `None` when nobody listens, or the caller shows only other nodes'
    /// text ([`RunOptions::live_nodes`](crate::RunOptions::live_nodes)):
    /// nodes then skip streaming altogether.
    pub fn token_stream(&self) -> Option<TokenStream> {
        if self
            .req
            .live
            .as_ref()
            .is_some_and(|live| !live[self.node.0])
        {
            return None;
        }
        self.req.tokens.as_ref().map(|sink| TokenStream {
            sink: sink.clone(),
            node: self.req.ids[self.node.0].clone(),
            attempt: self.attempt,
        })
    }

    /// The request's priority band (see
    /// [`RunOptions::priority`](crate::RunOptions::priority)): a node that
    /// calls a model engine passes it on.
    pub fn priority(&self) -> glassbox_trace::Priority {
        self.req.priority
    }

    /// The most tokens one model call may generate for this request: the
    /// node's own `max_tokens`, lowered by the caller's cap
    /// ([`RunOptions::max_tokens`](crate::RunOptions::max_tokens)).
    pub fn max_tokens(&self, own: u64) -> u64 {
        self.req.max_tokens.map_or(own, |cap| own.min(cap.max(1)))
    }

    /// The caller's tools and answer format for model calls
    /// ([`RunOptions::model_ask`](crate::RunOptions::model_ask)), if any.
    pub fn model_ask(&self) -> Option<&crate::options::ModelAsk> {
        self.req.model_ask.as_deref()
    }

    /// Names the worker doing this attempt's work (the cluster worker a
    /// call was placed on): the span records it instead of the pipeline's
    /// own worker name. The last name set wins (a call that failed over).
    pub fn set_worker(&self, worker: &str) {
        *self
            .cell
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::from(worker));
    }

    /// Tells the engine that a step of this attempt finished (an agent's
    /// model or tool call), as it finishes. When the attempt then ends
    /// without an output (its timeout, the request's deadline, a cancel,
    /// an error), the steps told so far are still recorded as spans and
    /// billed; when it returns an output, the output's `steps` are.
    pub fn step_done(&self, step: crate::output::Step) {
        if !self.attempt_over() {
            self.cell
                .steps
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(step);
        }
    }

    /// Whether the engine stopped waiting for this attempt: the request
    /// was cancelled or failed elsewhere, its deadline passed, or the
    /// attempt timed out. Blocking work that can stop early (a remote call
    /// read piece by piece) checks it and gives up, closing its connection.
    pub fn attempt_over(&self) -> bool {
        self.cell.over.load(Ordering::Relaxed)
    }

    /// How long the engine will still wait for this attempt: until the
    /// node's timeout or the request's deadline, whichever comes first.
    /// A remote call tells its server (a worker answers 429 at once when
    /// it cannot start the call in that time). `None` outside an attempt.
    pub fn time_left(&self) -> Option<std::time::Duration> {
        self.cell
            .ends_at
            .map(|at| at.saturating_duration_since(tokio::time::Instant::now()))
    }

    /// Every finished node's label by id (`labels.<id>`).
    pub fn labels_json(&self) -> Map<String, Value> {
        self.req.labels_json()
    }
}
