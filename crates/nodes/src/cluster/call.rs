//! One node call on the cluster: placed on a worker, sent to its
//! OpenAI-compatible API, and moved to another worker when the first
//! refuses, dies mid-call or hangs.
//!
//! - A call moves on when its error is retryable (connection refused or
//!   reset, HTTP 5xx or 429, a stream cut short, silence longer than the
//!   attempt timeout), at most [`DispatchOptions::max_attempts`] workers
//!   in all, never to a worker it already failed on.
//! - A streamed answer moves on only before its first piece reached the
//!   caller: after that, the caller has seen text another worker would
//!   not continue.
//! - Chats are always read from the worker as server-sent events, so the
//!   call notices between two pieces when the engine stopped waiting
//!   (request cancelled, deadline, node timeout) and drops the connection:
//!   the worker then stops generating.
//! - Each failure that is the worker's fault counts on its circuit
//!   breaker (an overloaded 429 does not, nor a timeout while the worker
//!   shows it works: [`verdict`](super::verdict)); each success closes it
//!   and teaches the throughput profile. Every progress event or piece of
//!   text a worker streams marks it as heard working.
//! - Failovers spend the coordinator's retry budget
//!   ([`glassbox_cluster::budget`]); a spent budget ends the call, and its
//!   error (in the trace and the explanation) says so.
//! - Overload sheds by priority: a worker's 429 ends an offline call at
//!   once (429 to its client: offline work goes first), while interactive
//!   and online calls move to another worker, and when every worker
//!   answered 429 wait a second and try the pool again, until their
//!   node's timeout or the request's deadline. While such a call waits,
//!   offline calls for its model are shed before they are sent
//!   ([`waiting`](super::waiting)), so they cannot take the room it waits
//!   for. A pool that is alive but
//!   overloaded thus answers 429 or late, never 503.
//!
//! [`DispatchOptions::max_attempts`]: super::DispatchOptions::max_attempts

use std::time::{Duration, Instant};

use glassbox_engine::trace::{FailedAttempt, Placed};
use glassbox_engine::{NodeCx, NodeError, TokenStream};
use glassbox_topology::ResourceKind;
use serde_json::Value;

use glassbox_cluster::Placement;

use super::{Chosen, Dispatcher, Spec, placed_fact};
use crate::check::BackendKind;
use crate::openai::Streamed;

/// A node whose calls go to the pool's workers.
#[derive(Debug, Clone)]
pub struct Remote {
    dispatcher: Dispatcher,
    kind: &'static str,
    node: String,
    model: Option<String>,
    affinity: Option<String>,
    /// How long a call may wait on a worker to start when the engine does
    /// not say what is left: its node's timeout.
    start_within: std::time::Duration,
}

/// A chat's answer: text, prompt tokens, completion tokens, model.
pub type ChatAnswer = crate::openai::ChatAnswer;

/// Embeddings: the vectors and the input tokens.
pub type Embedded = (Vec<Vec<f32>>, u64);

/// What a placed call produced, and where it ran.
pub struct Done<T> {
    pub value: T,
    pub worker: String,
    /// For the trace: where, why, and the workers failed on first.
    pub placed: Placed,
}

impl Remote {
    /// The remote form of a `kind` node, when it belongs on the workers:
    /// the build has a [`Dispatcher`] (its `Resources::cluster`), the node is tagged
    /// `resource: {type: gpu}` and uses the default `local` backend.
    pub fn for_node(
        kind: &'static str,
        node: &glassbox_topology::Node,
        backend: BackendKind,
        dispatcher: Option<&Dispatcher>,
    ) -> Option<Remote> {
        if node.resource.kind != ResourceKind::Gpu || backend != BackendKind::Local {
            return None;
        }
        Some(Remote {
            dispatcher: dispatcher?.clone(),
            kind,
            node: node.id.clone(),
            model: node.resource.model.clone(),
            affinity: node.affinity.clone(),
            start_within: node.timeout,
        })
    }

    /// The model name calls ask workers for.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// A chat completion on a worker: text, prompt tokens, completion
    /// tokens, model. Pieces go to `tokens` as they arrive.
    pub fn chat(
        &self,
        cx: &NodeCx,
        messages: &Value,
        params: &Value,
        tokens: Option<&TokenStream>,
    ) -> Result<Done<ChatAnswer>, NodeError> {
        let d = &self.dispatcher;
        self.run(Some(cx), |chosen, sent| {
            let start = Instant::now();
            let mut first: Option<Instant> = None;
            // Every call streams and is paced as watched on the worker,
            // even for a node no live stream shows: sending
            // `WATCHED_HEADER: false` for those measured slower, not faster
            // (rag-chat on two one-thread workers, first-time questions:
            // 0.69x the previous build's runs a second; docs/BENCHMARKS.md,
            // "On cluster workers"), so it is not sent until that is
            // understood.
            let answer =
                chosen
                    .endpoint
                    .chat_streamed(messages.clone(), params, &mut |streamed| {
                        if cx.attempt_over() {
                            return false;
                        }
                        d.heard(&chosen.worker);
                        let Streamed::Text(piece) = streamed else {
                            return true;
                        };
                        first.get_or_insert_with(Instant::now);
                        if let Some(t) = tokens {
                            t.send(piece);
                            *sent = true;
                        }
                        true
                    })?;
            // Decode speed: tokens after the first over the time after it.
            let out = answer.output();
            let tps = match first {
                Some(f) if out > 1 => rate(out - 1, f.elapsed().as_secs_f64()),
                _ => rate(out, start.elapsed().as_secs_f64()),
            };
            Ok((answer, tps))
        })
    }

    /// Embeds `texts` on a worker: the vectors and the input tokens.
    pub fn embed(
        &self,
        cx: Option<&NodeCx>,
        texts: &[String],
    ) -> Result<Done<Embedded>, NodeError> {
        self.run(cx, |chosen, _| {
            let start = Instant::now();
            let (vectors, tokens) = chosen.endpoint.embed(texts)?;
            let tps = rate(tokens, start.elapsed().as_secs_f64());
            Ok(((vectors, tokens), tps))
        })
    }

    /// The failover loop; `op` makes one attempt on the chosen worker and
    /// sets its flag once output reached the caller.
    fn run<T>(
        &self,
        cx: Option<&NodeCx>,
        mut op: impl FnMut(&Chosen, &mut bool) -> Result<(T, Option<f64>), NodeError>,
    ) -> Result<Done<T>, NodeError> {
        let d = &self.dispatcher;
        let spec = Spec {
            kind: self.kind,
            model: self.model.as_deref(),
            affinity: match (&self.affinity, cx) {
                (Some(group), Some(cx)) => Some((group.as_str(), cx.request_id())),
                _ => None,
            },
        };
        let over = || cx.is_some_and(NodeCx::attempt_over);
        let offline =
            cx.is_some_and(|cx| cx.priority() == glassbox_engine::trace::Priority::Offline);
        let model = self.model.as_deref().unwrap_or("");
        let urgent = d.waiters().count(self.kind, model);
        if offline && urgent > 0 {
            // More urgent calls already wait for room: this one would take
            // the next free slot from them.
            return Err(NodeError::Overloaded(format!(
                "`{}` is offline work and {urgent} more urgent call(s) wait for a worker of `{}`: offline requests are shed first",
                self.node,
                self.model.as_deref().unwrap_or("any model")
            )));
        }
        // Held while this call waits for room on a full pool.
        let mut waiting: Option<super::waiting::Waiting> = None;
        let mut tried: Vec<String> = Vec::new();
        let mut failed: Vec<FailedAttempt> = Vec::new();
        // Workers that answered 429 since the pool was last tried afresh.
        let mut busy = 0usize;
        d.called();
        loop {
            if over() {
                return Err(crate::openai::abandoned(&format!("`{}`", self.node)));
            }
            let mut chosen = match d.choose(&spec, &tried) {
                Ok(c) => c,
                // Every worker left answered 429: alive, overloaded. Come
                // back after the `Retry-After` second to the whole pool.
                Err(_) if busy > 0 && cx.is_some() => {
                    std::thread::sleep(OVERLOADED_PAUSE);
                    tried = failed.iter().map(|f| f.worker.clone()).collect();
                    busy = 0;
                    continue;
                }
                Err(p) => return Err(self.no_worker(&p, &failed)),
            };
            if let Some(cx) = cx {
                cx.set_worker(&chosen.worker);
            }
            // What is left of the node's timeout and the request's
            // deadline: a call that waited for the pool has less.
            let within = cx.and_then(NodeCx::time_left).unwrap_or(self.start_within);
            chosen.endpoint = chosen
                .endpoint
                .with_header(super::START_WITHIN_HEADER, within.as_millis().to_string());
            let in_flight = d.begin(&chosen.worker);
            let mut sent = false;
            let result = op(&chosen, &mut sent);
            drop(in_flight);
            let error = match result {
                Ok((value, tps)) => {
                    d.succeeded(
                        &chosen.worker,
                        self.model.as_deref().unwrap_or(""),
                        &chosen.hardware,
                        tps,
                    );
                    return Ok(Done {
                        value,
                        placed: placed_fact(
                            &chosen,
                            self.model.as_deref(),
                            self.affinity.as_deref(),
                            &failed,
                        ),
                        worker: chosen.worker,
                    });
                }
                Err(e) => e,
            };
            if over() {
                // Abandoned by the engine: not the worker's fault.
                d.abandoned(&chosen.worker);
                return Err(error);
            }
            let overloaded = overloaded(&error);
            if error.retryable() && !overloaded {
                d.failed(&chosen.worker, &error.to_string());
            } else {
                d.abandoned(&chosen.worker);
            }
            if overloaded && !sent {
                if offline {
                    // Offline work is the first to go under overload.
                    return Err(NodeError::Overloaded(format!(
                        "`{}` is offline work and worker {} is at capacity ({error}): offline requests are shed first",
                        self.node, chosen.worker
                    )));
                }
                // Busy, not broken: try the others, then the pool again,
                // without spending the retry budget (the pause paces it).
                // Offline calls are shed while this one waits.
                waiting.get_or_insert_with(|| d.waiters().wait(self.kind, model));
                busy += 1;
                tried.push(chosen.worker);
                continue;
            }
            failed.push(FailedAttempt {
                worker: chosen.worker.clone(),
                error: glassbox_topology::secret::mask_text(&error.to_string()).into_owned(),
            });
            tried.push(chosen.worker);
            let last = failed.len() >= d.options().max_attempts.max(1) as usize;
            if !error.retryable() || sent || last {
                return Err(self.gave_up(error, &failed));
            }
            if let Err(spent) = d.may_retry() {
                let note = format!("no failover: {spent}");
                return Err(with_note(self.gave_up(error, &failed), &note));
            }
        }
    }

    /// The error when placement found nobody (left) to try.
    fn no_worker(&self, placement: &Placement, failed: &[FailedAttempt]) -> NodeError {
        let model = self.model.as_deref().unwrap_or("any model");
        if failed.is_empty() {
            return NodeError::Unavailable(format!(
                "no worker of the pool can run `{}` ({}, {model}): {}",
                self.node,
                self.kind,
                placement.why_none()
            ));
        }
        // The workers it failed on are named with their errors; the
        // others with the filter that left them out.
        let others: Vec<String> = placement
            .candidates
            .iter()
            .filter(|a| !failed.iter().any(|f| f.worker == a.worker))
            .filter_map(|a| a.failed().map(|c| format!("{}: {}", a.worker, c.detail)))
            .collect();
        let rest = if others.is_empty() {
            "no other worker in the pool".to_string()
        } else {
            format!("no other worker can take it ({})", others.join("; "))
        };
        NodeError::Unavailable(format!(
            "`{}` failed on {}, and {rest}",
            self.node,
            attempts(failed)
        ))
    }

    /// The error that ends the call, naming every worker it failed on.
    fn gave_up(&self, error: NodeError, failed: &[FailedAttempt]) -> NodeError {
        let named = format!("on {}", attempts(failed));
        match error {
            NodeError::Upstream {
                message,
                detail,
                retryable,
            } => NodeError::Upstream {
                message: format!("`{}` failed {named}: {message}", self.node),
                detail,
                retryable,
            },
            NodeError::Unavailable(_) => {
                NodeError::Unavailable(format!("`{}` failed {named}", self.node))
            }
            other => other,
        }
    }
}

fn attempts(failed: &[FailedAttempt]) -> String {
    failed
        .iter()
        .map(|f| format!("{} ({})", f.worker, f.error))
        .collect::<Vec<_>>()
        .join(", then ")
}

/// How long a call waits when every worker answered 429 (the
/// `Retry-After` workers send).
const OVERLOADED_PAUSE: Duration = Duration::from_secs(1);

/// `error` with `note` added to the message its caller sees.
fn with_note(error: NodeError, note: &str) -> NodeError {
    match error {
        NodeError::Upstream {
            message,
            detail,
            retryable,
        } => NodeError::Upstream {
            message: format!("{message}; {note}"),
            detail,
            retryable,
        },
        NodeError::Unavailable(m) => NodeError::Unavailable(format!("{m}; {note}")),
        other => NodeError::Unavailable(format!("{other}; {note}")),
    }
}

/// An overloaded worker (HTTP 429) is busy, not broken.
fn overloaded(e: &NodeError) -> bool {
    matches!(e, NodeError::Upstream { detail, .. } if detail.starts_with("HTTP 429"))
}

fn rate(tokens: u64, secs: f64) -> Option<f64> {
    (tokens > 0 && secs > 0.0).then(|| tokens as f64 / secs)
}
