//! One attempt of one node: call it, run its work where it belongs, time it,
//! price it and record its span.
//!
//! The span is owned by a guard from the moment the attempt starts, so an
//! attempt dropped mid-flight (request cancelled, deadline passed, another
//! node failed) still records a span saying so.
//!
//! An attempt is split in two: [`begin`] calls the node (synchronously) and
//! [`finish`] awaits whatever work it handed back. When the call already
//! produced its output ([`Call::Ready`]), the executor finishes it inline
//! ([`Begun::into_ready`]) without creating a future: that is the hot path
//! for cheap nodes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use glassbox_topology::NodeId;
use glassbox_trace::{ErrorRecord, SpanRecord, SpanRole, SpanStatus, Tags, Usage};

use crate::built::BuiltPipeline;
use crate::cache::{self, Miss, NodeCache, Probe};
use crate::cost;
use crate::cpu::{self, CpuTimed};
use crate::error::NodeError;
use crate::node::{AttemptCell, Call, NodeCx, NodeResult};
use crate::output::NodeOutput;
use crate::request::{DeadlineCut, Ending, RequestShared, Slot, summarize};

/// Which attempt to make.
pub(crate) struct AttemptSpec {
    pub node: NodeId,
    pub attempt: u32,
    pub role: SpanRole,
    pub reruns: u32,
    pub sources: Arc<[NodeId]>,
    /// What the node's response cache found before the attempt (a
    /// similarity lookup, which runs asynchronously); `None` looks up the
    /// exact key in `begin`.
    pub probe: Option<Probe>,
    /// When the attempt began, if before `begin` (the cache lookup's start),
    /// as (Unix µs, µs since the request started).
    pub started: Option<(u64, u64)>,
}

/// What the response cache did for an attempt.
enum CacheMark {
    /// Answered from the cache: the node was not called.
    Hit,
    /// Not answered: store the output under `miss` if the attempt succeeds.
    /// `refresh`: a re-run, which does not read the cache.
    Store {
        cache: Arc<NodeCache>,
        miss: Miss,
        refresh: bool,
    },
}

/// Why an attempt did not produce an output.
#[derive(Debug)]
pub(crate) enum AttemptError {
    Node(NodeError),
    Timeout(Duration),
}

impl AttemptError {
    pub fn retryable(&self) -> bool {
        match self {
            AttemptError::Node(e) => e.retryable(),
            AttemptError::Timeout(_) => true,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            AttemptError::Node(e) => e.to_string(),
            AttemptError::Timeout(d) => format!("timed out after {} ms", d.as_millis()),
        }
    }
}

/// Records the attempt's span exactly once: on finish, or on drop.
pub(crate) struct SpanGuard {
    req: Arc<RequestShared>,
    node: NodeId,
    attempt: u32,
    role: Option<SpanRole>,
    started_at_us: u64,
    start_us: u64,
    input_summary: Arc<str>,
    cache: Option<CacheMark>,
    /// Shared with the node's context: the worker it placed its work on;
    /// ended when the span is recorded.
    cell: Arc<AttemptCell>,
}

/// How an attempt ended, for its span.
struct AttemptEnd {
    status: SpanStatus,
    error: Option<ErrorRecord>,
    usage: Usage,
    tags: Tags,
    output_summary: Arc<str>,
    /// What the attempt's steps cost beyond the node's prices.
    extra_cost: rust_decimal::Decimal,
    /// The attempt's steps, each recorded as a span of its own.
    steps: Vec<crate::output::Step>,
}

/// The end of an attempt that produced no output: the steps it told
/// before it ended still count (their tokens and costs are the
/// attempt's), so nothing it did is lost from the trace or the receipt.
fn unfinished(
    cell: &AttemptCell,
    status: SpanStatus,
    error: ErrorRecord,
    cpu_us: Option<u64>,
) -> AttemptEnd {
    let steps = cell.take_steps();
    let sum = |f: fn(&(u64, u64)) -> u64| -> Option<u64> {
        let mut any = false;
        let total = steps
            .iter()
            .filter_map(|s| s.tokens.as_ref())
            .inspect(|_| any = true)
            .map(f)
            .fold(0u64, u64::saturating_add);
        any.then_some(total)
    };
    AttemptEnd {
        status,
        error: Some(error),
        usage: Usage {
            wall_us: 0,
            cpu_us,
            input_tokens: sum(|t| t.0),
            output_tokens: sum(|t| t.1),
            tokens: None,
        },
        tags: Tags::new(),
        output_summary: Arc::from(""),
        extra_cost: crate::steps::extra_cost(&steps),
        steps,
    }
}

impl SpanGuard {
    fn record(&mut self, end: AttemptEnd) {
        let Some(role) = self.role.take() else { return };
        // Whatever still runs for this attempt (blocking work after a
        // timeout or a cancel) is no longer waited for.
        self.cell.end();
        let req = &self.req;
        let node = req.topology.node(self.node);
        let end_us = req.offset_us();
        let mut usage = end.usage;
        usage.wall_us = end_us.saturating_sub(self.start_us);
        let cost = match self.cache {
            // Served from the cache: nothing ran, nothing is charged.
            Some(CacheMark::Hit) => rust_decimal::Decimal::ZERO,
            _ => cost::attempt_cost(&node.resource.prices, node.resource.kind, &usage)
                .saturating_add(end.extra_cost),
        };
        let mut tags = end.tags;
        // A band other than the default is worth a tag on every span: the
        // trace then shows what ran at which priority.
        if req.priority != glassbox_trace::Priority::default() {
            tags.insert("priority".into(), req.priority.as_str().into());
        }
        if let Some(k) = req.iteration(self.node) {
            tags.insert(glassbox_trace::ITERATION_TAG.into(), k.to_string());
        }
        req.record_span(SpanRecord {
            request_id: req.request_id,
            node: req.ids[self.node.0].clone(),
            kind: req.kinds[self.node.0].clone(),
            attempt: self.attempt,
            role,
            started_at_us: self.started_at_us,
            start_us: self.start_us,
            end_us,
            status: end.status,
            error: end.error,
            tags,
            usage,
            cost,
            worker: self.cell.worker().unwrap_or_else(|| req.worker.clone()),
            input_summary: self.input_summary.clone(),
            output_summary: end.output_summary,
        });
        if !end.steps.is_empty() {
            let worker = self.cell.worker().unwrap_or_else(|| req.worker.clone());
            crate::steps::record(req, self.node, self.attempt, &worker, &end.steps);
        }
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        if self.role.is_none() {
            return;
        }
        let (status, code, message) = match self.req.ending() {
            Ending::Deadline => {
                self.req.mark_deadline_cut(DeadlineCut {
                    node: self.node,
                    attempt: self.attempt,
                });
                (
                    SpanStatus::Timeout,
                    "deadline_exceeded",
                    "request deadline exceeded",
                )
            }
            Ending::Failed => (
                SpanStatus::Cancelled,
                "cancelled",
                "request failed elsewhere",
            ),
            Ending::Cancelled => (SpanStatus::Cancelled, "cancelled", "request cancelled"),
        };
        let error = ErrorRecord {
            code: code.into(),
            message: message.into(),
            node: Some(self.req.ids[self.node.0].clone()),
            attempt: Some(self.attempt),
            detail: None,
        };
        let end = unfinished(&self.cell, status, error, None);
        self.record(end);
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// When the engine stops waiting for an attempt of `node` begun now.
fn ends_at(req: &RequestShared, node: NodeId) -> Option<tokio::time::Instant> {
    let timeout = tokio::time::Instant::now().checked_add(req.topology.node(node).timeout);
    match (timeout, req.deadline_at) {
        (Some(t), Some(d)) => Some(t.min(d)),
        (t, d) => t.or(d),
    }
}

/// An attempt whose node has been called.
pub(crate) struct Begun {
    guard: SpanGuard,
    call: Call,
    setup_cpu: Option<Duration>,
    limit: Duration,
}

/// Starts an attempt: opens its span and calls the node.
pub(crate) fn begin(built: &BuiltPipeline, req: &Arc<RequestShared>, spec: AttemptSpec) -> Begun {
    let input_summary = match spec.sources.first().and_then(|&s| req.slot(s)) {
        Some(slot) => slot.summary,
        None => req.input_summary.clone(),
    };
    let (started_at_us, start_us) = spec
        .started
        .unwrap_or_else(|| (glassbox_trace::unix_micros_now(), req.offset_us()));
    let refresh = matches!(spec.role, SpanRole::Rerun { .. });
    let mut guard = SpanGuard {
        req: req.clone(),
        node: spec.node,
        attempt: spec.attempt,
        role: Some(spec.role),
        started_at_us,
        start_us,
        input_summary,
        cache: None,
        cell: Arc::new(AttemptCell::until(ends_at(req, spec.node))),
    };
    let cx = NodeCx {
        req: req.clone(),
        node: spec.node,
        attempt: spec.attempt,
        reruns: spec.reruns,
        sources: spec.sources,
        cell: guard.cell.clone(),
    };
    let node = &built.nodes[spec.node.0];
    if let Some(cache) = &built.caches[spec.node.0] {
        let probe = match spec.probe {
            Some(p) if !refresh => p,
            _ => {
                let key = cache.key(node.as_ref(), &cx);
                if refresh {
                    Probe::Miss(Miss { key, vector: None })
                } else {
                    cache.exact(key)
                }
            }
        };
        match probe {
            Probe::Hit(hit) => {
                let output = hit.output();
                // A streaming caller gets the cached text in one piece.
                if let (Some(tokens), Some(text)) =
                    (cx.token_stream(), crate::output::text_of(&output.value))
                {
                    tokens.send(text);
                }
                guard.cache = Some(CacheMark::Hit);
                return Begun {
                    guard,
                    call: Call::Ready(Ok(output)),
                    setup_cpu: Some(Duration::ZERO),
                    limit: req.topology.node(spec.node).timeout,
                };
            }
            Probe::Miss(miss) => {
                guard.cache = Some(CacheMark::Store {
                    cache: cache.clone(),
                    miss,
                    refresh,
                });
            }
        }
    }
    let clock = built.options.cpu_clock;
    let (call, setup_cpu) = clock.measure(|| catch_unwind(AssertUnwindSafe(|| node.call(cx))));
    let call = call.unwrap_or_else(|p| Call::Ready(Err(NodeError::Panicked(panic_message(&*p)))));
    Begun {
        guard,
        call,
        setup_cpu,
        limit: req.topology.node(spec.node).timeout,
    }
}

impl Begun {
    /// Whether the call already succeeded (finish it with `into_ready`).
    pub fn is_ready_ok(&self) -> bool {
        matches!(self.call, Call::Ready(Ok(_)))
    }

    /// Finishes an attempt whose call returned [`Call::Ready`].
    pub fn into_ready(self) -> Result<Slot, AttemptError> {
        let Begun {
            guard,
            call,
            setup_cpu,
            ..
        } = self;
        match call {
            Call::Ready(r) => conclude(guard, r.map_err(AttemptError::Node), setup_cpu),
            // Not reachable through the executor; treat as a bug in the node.
            _ => conclude(
                guard,
                Err(AttemptError::Node(NodeError::failed("not ready"))),
                None,
            ),
        }
    }
}

/// Awaits the attempt's work and records its span.
pub(crate) async fn finish(begun: Begun, built: &BuiltPipeline) -> Result<Slot, AttemptError> {
    let Begun {
        guard,
        call,
        setup_cpu,
        limit,
    } = begun;
    let (result, work_cpu): (Result<NodeResult, AttemptError>, Option<Duration>) = match call {
        Call::Ready(r) => (Ok(r), Some(Duration::ZERO)),
        Call::Blocking(f) => {
            let task = tokio::task::spawn_blocking(move || cpu::measure(f));
            match tokio::time::timeout(limit, task).await {
                Ok(Ok((r, used))) => (Ok(r), used),
                Ok(Err(join)) => (Ok(Err(NodeError::Panicked(join.to_string()))), None),
                Err(_) => (Err(AttemptError::Timeout(limit)), None),
            }
        }
        Call::Future(f) => {
            let timed = CpuTimed::new(f, built.options.cpu_clock);
            match tokio::time::timeout(limit, timed).await {
                Ok((r, used)) => (Ok(r), used),
                Err(_) => (Err(AttemptError::Timeout(limit)), None),
            }
        }
    };
    let cpu = match (setup_cpu, work_cpu) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    conclude(
        guard,
        result.and_then(|r| r.map_err(AttemptError::Node)),
        cpu,
    )
}

fn conclude(
    mut guard: SpanGuard,
    result: Result<NodeOutput, AttemptError>,
    cpu: Option<Duration>,
) -> Result<Slot, AttemptError> {
    let cpu_us = cpu.map(micros);
    match result {
        Ok(output) => {
            let summary: Arc<str> = summarize(&output.value, guard.req.summary_chars).into();
            let usage = Usage {
                wall_us: 0,
                cpu_us,
                input_tokens: output.tokens.input,
                output_tokens: output.tokens.output,
                tokens: output.tokens.classes,
            };
            let output = Arc::new(output);
            let mut tags = output.tags.clone();
            if let Some(CacheMark::Store {
                cache,
                miss,
                refresh,
            }) = &guard.cache
            {
                cache.store(miss, output.clone());
                let what = if *refresh {
                    cache::REFRESH
                } else {
                    cache::MISS
                };
                tags.insert(cache::TAG.into(), what.into());
                tags.insert("cache_key".into(), cache::short(&miss.key));
            }
            guard.record(AttemptEnd {
                status: SpanStatus::Ok,
                error: None,
                usage,
                tags,
                output_summary: summary.clone(),
                extra_cost: crate::steps::extra_cost(&output.steps),
                steps: output.steps.to_vec(),
            });
            Ok(Slot { output, summary })
        }
        Err(err) => {
            let (status, code) = match &err {
                AttemptError::Timeout(_) => (SpanStatus::Timeout, "timeout"),
                AttemptError::Node(e) => (SpanStatus::Error, e.code()),
            };
            let node = guard.req.ids[guard.node.0].clone();
            let attempt = guard.attempt;
            let error = ErrorRecord {
                code: code.into(),
                message: glassbox_topology::secret::mask_text(&err.describe()).into_owned(),
                node: Some(node),
                attempt: Some(attempt),
                detail: match &err {
                    AttemptError::Node(e) => e
                        .detail()
                        .map(|d| glassbox_topology::secret::mask_text(d).into_owned()),
                    AttemptError::Timeout(_) => None,
                },
            };
            let end = unfinished(&guard.cell, status, error, cpu_us);
            guard.record(end);
            Err(err)
        }
    }
}
