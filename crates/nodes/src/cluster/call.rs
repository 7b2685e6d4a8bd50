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
//!   breaker (an overloaded 429 does not); each success closes it and
//!   teaches the throughput profile.
//!
//! [`DispatchOptions::max_attempts`]: super::DispatchOptions::max_attempts

use std::time::Instant;

use glassbox_engine::trace::{FailedAttempt, Placed};
use glassbox_engine::{BuildContext, NodeCx, NodeError, TokenStream};
use glassbox_topology::ResourceKind;
use serde_json::Value;

use glassbox_cluster::Placement;

use super::{Chosen, Dispatcher, Spec, placed_fact};
use crate::check::BackendKind;

/// A node whose calls go to the pool's workers.
#[derive(Debug, Clone)]
pub struct Remote {
    dispatcher: Dispatcher,
    kind: &'static str,
    node: String,
    model: Option<String>,
    affinity: Option<String>,
}

/// A chat's answer: text, prompt tokens, completion tokens, model.
pub type ChatAnswer = (String, u64, u64, String);

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
    /// the build context has a [`Dispatcher`], the node is tagged
    /// `resource: {type: gpu}` and uses the default `local` backend.
    pub fn for_node(
        kind: &'static str,
        node: &glassbox_topology::Node,
        backend: BackendKind,
        cx: &BuildContext,
    ) -> Option<Remote> {
        if node.resource.kind != ResourceKind::Gpu || backend != BackendKind::Local {
            return None;
        }
        let dispatcher = cx.get::<Dispatcher>()?;
        Some(Remote {
            dispatcher: (*dispatcher).clone(),
            kind,
            node: node.id.clone(),
            model: node.resource.model.clone(),
            affinity: node.affinity.clone(),
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
        self.run(Some(cx), |chosen, sent| {
            let start = Instant::now();
            let mut first: Option<Instant> = None;
            let answer = chosen
                .endpoint
                .chat_streamed(messages.clone(), params, &mut |piece| {
                    if cx.attempt_over() {
                        return false;
                    }
                    first.get_or_insert_with(Instant::now);
                    if let Some(t) = tokens {
                        t.send(piece);
                        *sent = true;
                    }
                    true
                })?;
            // Decode speed: tokens after the first over the time after it.
            let out = answer.2;
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
        let mut tried: Vec<String> = Vec::new();
        let mut failed: Vec<FailedAttempt> = Vec::new();
        loop {
            if over() {
                return Err(crate::openai::abandoned(&format!("`{}`", self.node)));
            }
            let chosen = d
                .choose(&spec, &tried)
                .map_err(|p| self.no_worker(&p, &failed))?;
            if let Some(cx) = cx {
                cx.set_worker(&chosen.worker);
            }
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
            if error.retryable() && !overloaded(&error) {
                d.failed(&chosen.worker);
            } else {
                d.abandoned(&chosen.worker);
            }
            failed.push(FailedAttempt {
                worker: chosen.worker.clone(),
                error: glassbox_topology::secret::mask_text(&error.to_string()).into_owned(),
            });
            tried.push(chosen.worker);
            let last = tried.len() >= d.options().max_attempts.max(1) as usize;
            if !error.retryable() || sent || last {
                return Err(self.gave_up(error, &failed));
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

/// An overloaded worker (HTTP 429) is busy, not broken.
fn overloaded(e: &NodeError) -> bool {
    matches!(e, NodeError::Upstream { detail, .. } if detail.starts_with("HTTP 429"))
}

fn rate(tokens: u64, secs: f64) -> Option<f64> {
    (tokens > 0 && secs > 0.0).then(|| tokens as f64 / secs)
}
