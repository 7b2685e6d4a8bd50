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
//! The executor owns the request's [`RunState`] (plain vectors indexed by
//! node and edge id, in `run_state`), so the hot path is counter decrements
//! and string compares (bare labels never go through CEL). It decides when
//! nodes start and how edges resolve; `node_run` runs each node, `finish`
//! assembles the trace. It finalises the trace on every exit: success,
//! failure, deadline, cancellation — and, through `Drop`, when the caller
//! drops the future.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use glassbox_topology::{EdgeId, NodeId};
use glassbox_trace::{Lang, LoopStop, NodeFacts, SpanRole};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::attempt::{self, AttemptSpec};
use crate::built::{BuiltPipeline, EdgeCondition};
use crate::error::ExecError;
use crate::finish::{self, EndedRun};
use crate::loops;
use crate::node_run::{NodeDone, run_node};
use crate::options::RunOptions;
use crate::outcome::Outcome;
use crate::request::{Ending, RequestShared, SharedParts, Slot};
use crate::run_state::{NodeProgress, RunState};
use crate::why;

/// The nodes running now, each a future of its whole run (attempts,
/// retries, fallback).
type RunningNodes<'a> = FuturesUnordered<Pin<Box<dyn Future<Output = NodeDone> + Send + 'a>>>;

/// One request being run: the pipeline, the state shared with its nodes,
/// the run state and the nodes in flight.
struct RequestRun<'a> {
    built: &'a BuiltPipeline,
    req: Arc<RequestShared>,
    state: RunState,
    running: RunningNodes<'a>,
    lang: Lang,
    /// The caller's facts about the request, told first.
    facts: Vec<NodeFacts>,
    deadline: Option<Duration>,
    /// Set once the trace is assembled (so `Drop` does not do it again).
    finished: bool,
}

pub(crate) async fn execute(built: &BuiltPipeline, input: Value, options: RunOptions) -> Outcome {
    let deadline = options.deadline.or(built.topology.deadline);
    let req = Arc::new(RequestShared::new(SharedParts {
        topology: built.topology.clone(),
        request_id: options.request_id.unwrap_or_default(),
        input,
        sink: built.options.sink.clone(),
        worker: built.options.worker.clone(),
        ids: built.node_ids.clone(),
        kinds: built.node_kinds.clone(),
        summary_chars: built.options.summary_chars,
        tokens: options.tokens.clone(),
        live: options.live_nodes.as_ref().map(|live| {
            built
                .node_ids
                .iter()
                .map(|id| live.iter().any(|l| l.as_str() == &**id))
                .collect()
        }),
        priority: options.priority,
        max_tokens: options.max_tokens,
        deadline,
        model_ask: options.model_ask.clone(),
    }));
    let mut run = RequestRun {
        built,
        req,
        state: RunState::new(&built.topology),
        running: FuturesUnordered::new(),
        lang: options.lang,
        facts: options.facts,
        deadline,
        finished: false,
    };
    let failure = run.drive(options.cancel.as_ref()).await;
    run.finish(failure)
}

impl<'a> RequestRun<'a> {
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
            while let Some(n) = self.state.ready.pop() {
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
        let topology = &self.built.topology;
        if !self.state.should_run(topology, n) {
            self.state.skip(topology, n);
            return;
        }
        self.state.nodes[n.0].progress = NodeProgress::Running;
        if let Some(l) = topology.loop_of(n) {
            let k = self.state.loops[l].enter();
            self.req.set_iteration(n, k);
            if let Some(fb) = topology.node(n).fallback {
                self.req.set_iteration(fb, k);
            }
        }
        // A loop's first node, run again, reads the loop's last node first.
        let sources: Arc<[NodeId]> = topology
            .incoming(n)
            .iter()
            .filter(|e| self.state.edges[e.0].taken && topology.is_back_edge(**e))
            .chain(
                topology
                    .incoming(n)
                    .iter()
                    .filter(|e| self.state.edges[e.0].taken && !topology.is_back_edge(**e)),
            )
            .map(|&e| topology.edge(e).from)
            .collect();
        if self.built.caches[n.0]
            .as_ref()
            .is_some_and(|c| c.policy().similarity.is_some())
        {
            // A similarity lookup embeds text first: not inline work.
            let fut = run_node(self.built, self.req.clone(), n, sources, None);
            self.running.push(Box::pin(fut));
            return;
        }
        let spec = AttemptSpec {
            node: n,
            attempt: 1,
            role: SpanRole::Primary,
            reruns: 0,
            sources: sources.clone(),
            probe: None,
            started: None,
        };
        let begun = attempt::begin(self.built, &self.req, spec);
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
        let fut = run_node(self.built, self.req.clone(), n, sources, Some(begun));
        self.running.push(Box::pin(fut));
    }

    /// Records a finished node; returns the error that fails the request.
    fn complete(&mut self, done: NodeDone) -> Option<ExecError> {
        let n = done.node;
        match done.result {
            Ok(slot) => {
                let progress = if done.fallback.is_some() {
                    NodeProgress::FellBack
                } else {
                    NodeProgress::Succeeded
                };
                self.state
                    .finish_node(n, progress, done.fallback, done.facts);
                if let Some(l) = self.built.topology.loop_of(n) {
                    self.state.loops[l].finished(n, slot.output.label.clone());
                }
                self.resolve_outgoing(n, &slot);
                None
            }
            Err(err) => {
                let state = &mut self.state;
                state.finish_node(n, NodeProgress::Failed, done.fallback, done.facts);
                state.fail_outgoing(&self.built.topology, n);
                Some(err)
            }
        }
    }

    /// Resolves a succeeded node's outgoing edges by their conditions.
    fn resolve_outgoing(&mut self, n: NodeId, slot: &Slot) {
        let built = self.built;
        let src = &built.node_ids[n.0];
        let via = self.state.nodes[n.0]
            .fallback
            .map(|f| built.node_ids[f.0].clone());
        // Built on the first expression edge only: labels never need them.
        let mut maps: Option<(Map<String, Value>, Map<String, Value>)> = None;
        // Back edges last: a loop that ends tells its held edges, which
        // must have resolved in this iteration first.
        let outgoing = built.topology.outgoing(n);
        let forward = outgoing
            .iter()
            .filter(|&&e| !built.topology.is_back_edge(e));
        let back = outgoing.iter().filter(|&&e| built.topology.is_back_edge(e));
        for &e in forward.chain(back) {
            let (taken, why) = match &built.edge_conditions[e.0] {
                EdgeCondition::Always => (true, why::unconditional(src, via.as_deref())),
                EdgeCondition::Label(want) => {
                    let (taken, why) = why::label(src, via.as_deref(), want, &slot.output);
                    (taken, Cow::Owned(why))
                }
                EdgeCondition::Expr { expr, reads } => {
                    let (outputs, labels) = maps
                        .get_or_insert_with(|| (self.req.outputs_json(), self.req.labels_json()));
                    let (taken, why) = why::expr(expr, reads, &self.req.input, outputs, labels);
                    (taken, Cow::Owned(why))
                }
            };
            if built.topology.is_back_edge(e) {
                self.resolve_back(e, taken, why);
            } else {
                self.state.resolve(&built.topology, e, taken, why);
            }
        }
    }

    /// A back edge whose condition held runs the loop again if its bound
    /// allows; otherwise the loop ends, and the why says which bound.
    fn resolve_back(&mut self, e: EdgeId, taken: bool, why: Cow<'static, str>) {
        let topology = &self.built.topology;
        let Some(l) = topology.loops().iter().position(|l| l.edge == e) else {
            return;
        };
        let stop = if taken {
            let spans = self.req.spans_so_far();
            loops::over_bound(topology, &topology.loops()[l], &self.state.loops[l], &spans)
        } else {
            Some(LoopStop::Condition {
                why: why.to_string(),
            })
        };
        match stop {
            None => self.state.resolve_back(topology, e, true, why, None),
            Some(stop) => {
                let why = match &stop {
                    LoopStop::Bound {
                        bound,
                        limit,
                        spent,
                    } => Cow::Owned(format!(
                        "{why}, but the loop reached `{bound}` {limit} ({spent})"
                    )),
                    _ => why,
                };
                self.state.resolve_back(topology, e, false, why, Some(stop));
            }
        }
    }

    fn finish(&mut self, failure: Option<ExecError>) -> Outcome {
        self.finished = true;
        // Drop in-flight attempts first: their guards record their spans
        // (cancelled / timed out) before the request record is sent.
        self.running = FuturesUnordered::new();
        let spans = self.req.take_spans();
        let outcome = finish::assemble(EndedRun {
            built: self.built,
            req: &self.req,
            state: &mut self.state,
            spans,
            failure,
            lang: self.lang,
            facts: std::mem::take(&mut self.facts),
        });
        self.req.sink.request(outcome.trace.record.clone());
        outcome
    }
}

impl Drop for RequestRun<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // The caller dropped the request future: still finalise the trace.
            self.req.set_ending(Ending::Cancelled);
            let _ = self.finish(Some(ExecError::Cancelled));
        }
    }
}
