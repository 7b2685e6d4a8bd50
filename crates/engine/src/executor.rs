//! The executor: generates one request's path while running it.
//!
//! Semantics (DESIGN.md, "Execution semantics"): entry nodes start at once;
//! a node is *ready* when every incoming edge is resolved; an edge is
//! *active* when its source succeeded (or its fallback did) and its
//! condition holds, *dead* when its source was skipped or its condition is
//! false; a ready node runs if any incoming edge is active, else it is
//! skipped and its outgoing edges die too. Ready nodes run concurrently on
//! one task (a `FuturesUnordered`); blocking work goes to the blocking pool.
//!
//! The executor owns all per-request bookkeeping in plain vectors indexed by
//! node and edge id, so the hot path is counter decrements and string
//! compares (bare labels never go through CEL). It finalises the trace on
//! every exit: success, failure, deadline, cancellation — and, through
//! `Drop`, when the caller drops the future.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use glassbox_topology::{EdgeId, NodeId};
use glassbox_trace::{Fact, Lang, RequestRecord, SpanRecord, SpanRole};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::attempt::{self, AttemptSpec};
use crate::error::ExecError;
use crate::finish::{self, Assembly};
use crate::node_run::{NodeDone, run_node};
use crate::pipeline::{EdgeCond, Inner, RunOptions};
use crate::request::{Ending, RequestShared, SharedParts, Slot};
use crate::why;

/// A request's trace: its record and every span, in the order they finished.
#[derive(Debug, Clone)]
pub struct Trace {
    pub record: Arc<RequestRecord>,
    pub spans: Vec<Arc<SpanRecord>>,
}

/// What running a request produced: always a complete trace, and the
/// output or the error.
#[derive(Debug)]
pub struct Outcome {
    pub trace: Trace,
    pub result: Result<Value, ExecError>,
}

/// Where a node is in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    Waiting,
    Running,
    Succeeded,
    FellBack,
    Skipped,
    Failed,
}

pub(crate) struct NState {
    pub pending: u32,
    pub active: bool,
    pub st: St,
    pub facts: Vec<Fact>,
    pub fallback: Option<NodeId>,
}

pub(crate) struct EState {
    pub resolved: bool,
    pub taken: bool,
    pub why: Cow<'static, str>,
}

type Running<'a> = FuturesUnordered<Pin<Box<dyn Future<Output = NodeDone> + Send + 'a>>>;

struct Exec<'a> {
    inner: &'a Inner,
    req: Arc<RequestShared>,
    nodes: Vec<NState>,
    edges: Vec<EState>,
    running: Running<'a>,
    ready: Vec<NodeId>,
    lang: Lang,
    deadline: Option<Duration>,
    done: bool,
}

pub(crate) async fn execute(inner: &Inner, input: Value, options: RunOptions) -> Outcome {
    let req = Arc::new(RequestShared::new(SharedParts {
        topology: inner.topology.clone(),
        request_id: options.request_id.unwrap_or_default(),
        input,
        sink: inner.options.sink.clone(),
        worker: inner.options.worker.clone(),
        ids: inner.ids.clone(),
        kinds: inner.kinds.clone(),
        summary_chars: inner.options.summary_chars,
        tokens: options.tokens.clone(),
    }));
    let topology = &inner.topology;
    let nodes = topology
        .nodes
        .iter()
        .enumerate()
        .map(|(i, _)| NState {
            pending: u32::try_from(topology.incoming(NodeId(i)).len()).unwrap_or(u32::MAX),
            active: false,
            st: St::Waiting,
            facts: Vec::new(),
            fallback: None,
        })
        .collect();
    let edges = (0..topology.edges.len())
        .map(|_| EState {
            resolved: false,
            taken: false,
            why: Cow::Borrowed(""),
        })
        .collect();
    let mut ex = Exec {
        inner,
        req,
        nodes,
        edges,
        running: FuturesUnordered::new(),
        ready: topology.entries().iter().rev().copied().collect(),
        lang: options.lang,
        deadline: options.deadline.or(topology.deadline),
        done: false,
    };
    let failure = ex.drive(options.cancel.as_ref()).await;
    ex.finish(failure)
}

impl<'a> Exec<'a> {
    async fn drive(&mut self, cancel: Option<&CancellationToken>) -> Option<ExecError> {
        let deadline_at = self.deadline.map(|d| self.req.start + d);
        let deadline = async move {
            match deadline_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async move {
            match cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        tokio::pin!(cancelled);
        loop {
            while let Some(n) = self.ready.pop() {
                self.dispatch(n);
            }
            if self.running.is_empty() {
                return None;
            }
            tokio::select! {
                biased;
                () = &mut cancelled => {
                    self.req.set_ending(Ending::Cancelled);
                    return Some(ExecError::Cancelled);
                }
                () = &mut deadline => {
                    self.req.set_ending(Ending::Deadline);
                    return Some(ExecError::DeadlineExceeded {
                        deadline: self.deadline.unwrap_or_default(),
                        node: None,
                        attempt: None,
                    });
                }
                Some(done) = self.running.next() => {
                    if let Some(err) = self.complete(done) {
                        self.req.set_ending(Ending::Failed);
                        return Some(err);
                    }
                }
            }
        }
    }

    fn dispatch(&mut self, n: NodeId) {
        let topology = &self.inner.topology;
        let incoming = topology.incoming(n);
        if !incoming.is_empty() && !self.nodes[n.0].active {
            self.nodes[n.0].st = St::Skipped;
            for &e in topology.outgoing(n) {
                self.resolve(e, false, Cow::Borrowed("source skipped"));
            }
            return;
        }
        self.nodes[n.0].st = St::Running;
        let sources: Arc<[NodeId]> = incoming
            .iter()
            .filter(|e| self.edges[e.0].taken)
            .map(|&e| topology.edge(e).from)
            .collect();
        let spec = AttemptSpec {
            node: n,
            attempt: 1,
            role: SpanRole::Primary,
            reruns: 0,
            sources: sources.clone(),
        };
        let begun = attempt::begin(self.inner, &self.req, spec);
        if begun.is_ready_ok() {
            // Hot path: the node did its (cheap) work inline; no future.
            if let Ok(slot) = begun.into_ready() {
                self.req.set_slot(n, slot.clone());
                let done = NodeDone {
                    node: n,
                    result: Ok(slot),
                    fallback: None,
                    facts: Vec::new(),
                };
                let _ = self.complete(done);
            }
            return;
        }
        let fut = run_node(self.inner, self.req.clone(), n, sources, Some(begun));
        self.running.push(Box::pin(fut));
    }

    /// Records a finished node; returns the error that fails the request.
    fn complete(&mut self, done: NodeDone) -> Option<ExecError> {
        let n = done.node;
        let state = &mut self.nodes[n.0];
        state.facts = done.facts;
        state.fallback = done.fallback;
        match done.result {
            Ok(slot) => {
                state.st = if done.fallback.is_some() {
                    St::FellBack
                } else {
                    St::Succeeded
                };
                self.resolve_outgoing(n, &slot);
                None
            }
            Err(err) => {
                state.st = St::Failed;
                for &e in self.inner.topology.outgoing(n) {
                    let edge = &mut self.edges[e.0];
                    edge.resolved = true;
                    edge.why = Cow::Borrowed("source failed");
                }
                Some(err)
            }
        }
    }

    fn resolve_outgoing(&mut self, n: NodeId, slot: &Slot) {
        let inner = self.inner;
        let src = &inner.ids[n.0];
        let via = self.nodes[n.0].fallback.map(|f| inner.ids[f.0].clone());
        let mut maps: Option<(Map<String, Value>, Map<String, Value>)> = None;
        for &e in inner.topology.outgoing(n) {
            let (taken, why) = match &inner.conds[e.0] {
                EdgeCond::Always => (true, why::unconditional(src, via.as_deref())),
                EdgeCond::Label(want) => {
                    let (taken, why) = why::label(src, via.as_deref(), want, &slot.output);
                    (taken, Cow::Owned(why))
                }
                EdgeCond::Expr { expr, reads } => {
                    let (outputs, labels) = maps
                        .get_or_insert_with(|| (self.req.outputs_json(), self.req.labels_json()));
                    let (taken, why) = why::expr(expr, reads, &self.req.input, outputs, labels);
                    (taken, Cow::Owned(why))
                }
            };
            self.resolve(e, taken, why);
        }
    }

    fn resolve(&mut self, e: EdgeId, taken: bool, why: Cow<'static, str>) {
        let edge = &mut self.edges[e.0];
        edge.resolved = true;
        edge.taken = taken;
        edge.why = why;
        let to = self.inner.topology.edge(e).to;
        let target = &mut self.nodes[to.0];
        target.pending = target.pending.saturating_sub(1);
        target.active |= taken;
        if target.pending == 0 {
            self.ready.push(to);
        }
    }

    fn finish(&mut self, failure: Option<ExecError>) -> Outcome {
        self.done = true;
        // Drop in-flight attempts first: their guards record their spans
        // (cancelled / timed out) before the request record is sent.
        self.running = FuturesUnordered::new();
        let spans = self.req.take_spans();
        let outcome = finish::assemble(Assembly {
            inner: self.inner,
            req: &self.req,
            nodes: &self.nodes,
            edges: &mut self.edges,
            spans,
            failure,
            lang: self.lang,
        });
        self.req.sink.request(outcome.trace.record.clone());
        outcome
    }
}

impl Drop for Exec<'_> {
    fn drop(&mut self) {
        if !self.done {
            // The caller dropped the request future: still finalise the trace.
            self.req.set_ending(Ending::Cancelled);
            let _ = self.finish(Some(ExecError::Cancelled));
        }
    }
}
