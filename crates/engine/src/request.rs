//! State one request shares between the executor and its running nodes.

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use glassbox_topology::{NodeId, Topology};
use glassbox_trace::{Priority, RequestId, SpanRecord, TraceSink};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::output::NodeOutput;
use crate::stream::TokenSink;

/// Why in-flight attempts are being dropped (read by their span guards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Ending {
    /// The caller went away or cancelled.
    Cancelled = 0,
    /// The request deadline passed.
    Deadline = 1,
    /// Another node failed the request.
    Failed = 2,
}

/// The attempt the request deadline cut short: the first in-flight attempt
/// dropped once the deadline passed (it marks itself as its span is
/// recorded). Names the node and attempt in the request's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeadlineCut {
    pub node: NodeId,
    pub attempt: u32,
}

/// A finished node's output and its summary (computed once, reused as the
/// input summary of the nodes downstream).
#[derive(Clone)]
pub(crate) struct Slot {
    pub output: Arc<NodeOutput>,
    pub summary: Arc<str>,
}

pub(crate) struct RequestShared {
    pub topology: Arc<Topology>,
    pub request_id: RequestId,
    pub input: Value,
    pub input_summary: Arc<str>,
    /// Characters of the whole input (its JSON text unless it is a string).
    pub input_chars: u64,
    pub slots: Box<[Mutex<Option<Slot>>]>,
    pub spans: Mutex<Vec<Arc<SpanRecord>>>,
    pub sink: Arc<dyn TraceSink>,
    pub worker: Arc<str>,
    /// Node ids and kinds as shared strings (from the pipeline).
    pub ids: Arc<[Arc<str>]>,
    pub kinds: Arc<[Arc<str>]>,
    pub start: Instant,
    /// When the request's deadline passes, if it has one.
    pub deadline_at: Option<Instant>,
    pub started_at_us: u64,
    pub summary_chars: usize,
    pub tokens: Option<TokenSink>,
    /// Per node index, whether it streams to `tokens` (`None`: all do).
    pub live: Option<Box<[bool]>>,
    /// The request's priority band (nodes pass it to model engines).
    pub priority: Priority,
    /// The caller's cap on generated tokens per model call.
    pub max_tokens: Option<u64>,
    /// The caller's tools and answer format for model calls.
    pub model_ask: Option<Arc<crate::options::ModelAsk>>,
    ending: AtomicU8,
    deadline_cut: OnceLock<DeadlineCut>,
    /// Each node's loop iteration (0: not in a loop's body), for its spans.
    iterations: Box<[AtomicU32]>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data behind the lock stays valid if a holder panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pieces [`RequestShared::new`] needs.
pub(crate) struct SharedParts {
    pub topology: Arc<Topology>,
    pub request_id: RequestId,
    pub input: Value,
    pub sink: Arc<dyn TraceSink>,
    pub worker: Arc<str>,
    pub ids: Arc<[Arc<str>]>,
    pub kinds: Arc<[Arc<str>]>,
    pub summary_chars: usize,
    pub tokens: Option<TokenSink>,
    pub live: Option<Box<[bool]>>,
    pub priority: Priority,
    pub max_tokens: Option<u64>,
    /// The request's deadline, from its start.
    pub deadline: Option<Duration>,
    pub model_ask: Option<Arc<crate::options::ModelAsk>>,
}

impl RequestShared {
    pub fn new(p: SharedParts) -> RequestShared {
        let n = p.topology.nodes.len();
        let (input_summary, input_chars) = summarize_counting(&p.input, p.summary_chars);
        let start = Instant::now();
        RequestShared {
            input_summary: input_summary.into(),
            input_chars,
            topology: p.topology,
            request_id: p.request_id,
            input: p.input,
            slots: (0..n).map(|_| Mutex::new(None)).collect(),
            spans: Mutex::new(Vec::with_capacity(n)),
            sink: p.sink,
            worker: p.worker,
            ids: p.ids,
            kinds: p.kinds,
            start,
            deadline_at: p.deadline.and_then(|d| start.checked_add(d)),
            started_at_us: glassbox_trace::unix_micros_now(),
            summary_chars: p.summary_chars,
            tokens: p.tokens,
            live: p.live,
            priority: p.priority,
            max_tokens: p.max_tokens,
            model_ask: p.model_ask,
            ending: AtomicU8::new(Ending::Cancelled as u8),
            deadline_cut: OnceLock::new(),
            iterations: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    pub fn output(&self, n: NodeId) -> Option<Arc<NodeOutput>> {
        self.slots
            .get(n.0)
            .and_then(|s| lock(s).as_ref().map(|s| s.output.clone()))
    }

    pub fn slot(&self, n: NodeId) -> Option<Slot> {
        self.slots.get(n.0).and_then(|s| lock(s).clone())
    }

    pub fn set_slot(&self, n: NodeId, slot: Slot) {
        if let Some(s) = self.slots.get(n.0) {
            *lock(s) = Some(slot);
        }
    }

    pub fn outputs_json(&self) -> Map<String, Value> {
        let mut map = Map::new();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(slot) = lock(s).as_ref() {
                map.insert(self.ids[i].to_string(), slot.output.value.clone());
            }
        }
        map
    }

    pub fn labels_json(&self) -> Map<String, Value> {
        let mut map = Map::new();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(label) = lock(s).as_ref().and_then(|s| s.output.label.clone()) {
                map.insert(self.ids[i].to_string(), Value::String(label));
            }
        }
        map
    }

    /// Microseconds since the request started (engine clock, so paused-clock
    /// tests see virtual time).
    pub fn offset_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    pub fn record_span(&self, span: SpanRecord) {
        let span = Arc::new(span);
        lock(&self.spans).push(span.clone());
        self.sink.span(span);
    }

    /// The spans recorded so far (for a loop's budgets).
    pub fn spans_so_far(&self) -> Vec<Arc<SpanRecord>> {
        lock(&self.spans).clone()
    }

    /// Sets the loop iteration node `n` runs in now.
    pub fn set_iteration(&self, n: NodeId, k: u32) {
        if let Some(a) = self.iterations.get(n.0) {
            a.store(k, Ordering::Relaxed);
        }
    }

    /// The loop iteration node `n` runs in, when it is in a loop's body.
    pub fn iteration(&self, n: NodeId) -> Option<u32> {
        self.iterations
            .get(n.0)
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&k| k > 0)
    }

    pub fn take_spans(&self) -> Vec<Arc<SpanRecord>> {
        std::mem::take(&mut *lock(&self.spans))
    }

    pub fn set_ending(&self, ending: Ending) {
        self.ending.store(ending as u8, Ordering::Relaxed);
    }

    /// Marks an attempt the deadline cut short; only the first mark counts.
    pub fn mark_deadline_cut(&self, cut: DeadlineCut) {
        let _ = self.deadline_cut.set(cut);
    }

    pub fn deadline_cut(&self) -> Option<DeadlineCut> {
        self.deadline_cut.get().copied()
    }

    pub fn ending(&self) -> Ending {
        match self.ending.load(Ordering::Relaxed) {
            1 => Ending::Deadline,
            2 => Ending::Failed,
            _ => Ending::Cancelled,
        }
    }
}

/// A JSON value as a short string for traces (strings unquoted).
/// [`summarize`], and the characters of the whole text it summarised
/// (one serialisation for both).
pub(crate) fn summarize_counting(value: &Value, max_chars: usize) -> (String, u64) {
    let cut = |text: &str| {
        let chars = text.chars().count() as u64;
        let summary = if max_chars == 0 {
            String::new()
        } else {
            glassbox_trace::truncate(text, max_chars)
        };
        (summary, chars)
    };
    match value {
        Value::String(s) => cut(s),
        Value::Null => (String::new(), 0),
        other => cut(&other.to_string()),
    }
}

pub(crate) fn summarize(value: &Value, max_chars: usize) -> String {
    if max_chars == 0 {
        return String::new();
    }
    match value {
        Value::String(s) => glassbox_trace::truncate(s, max_chars),
        Value::Null => String::new(),
        other => glassbox_trace::truncate(&other.to_string(), max_chars),
    }
}
