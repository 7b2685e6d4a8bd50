//! Spans: one per node attempt.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::id::RequestId;
use crate::record::ErrorRecord;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanStatus {
    Ok,
    Error,
    Timeout,
    /// The request was cancelled or failed elsewhere while this attempt ran.
    Cancelled,
}

/// Why this node ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum SpanRole {
    /// On the path in its own right.
    Primary,
    /// As the fallback of `replaces`, after it failed.
    Fallback { replaces: Arc<str> },
    /// Re-run because downstream node `by` asked for it (an output guard).
    Rerun { by: Arc<str> },
    /// One step inside an attempt of node `of` (an agent's model call or
    /// tool call). Its `node` is `of#N` (N: the step's number, from 1) and
    /// its tag `iteration` the loop iteration it belongs to. Its usage and
    /// cost are part of `of`'s attempt: the step itemises it.
    Step { of: Arc<str> },
}

impl SpanRole {
    /// The node whose attempt this step span belongs to, for a step.
    pub fn step_of(&self) -> Option<&str> {
        match self {
            SpanRole::Step { of } => Some(of),
            _ => None,
        }
    }
}

/// Resources one attempt used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Wall-clock microseconds.
    pub wall_us: u64,
    /// Thread CPU microseconds spent in the node's own code, when measured.
    pub cpu_us: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// The tokens split by price class (cached, cache writes, reasoning,
    /// audio), when the model's usage reported them; `input_tokens` and
    /// `output_tokens` are then its prompt and completion totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::tokens::TokenUsage>,
}

/// Short key/value tags a node attaches to its span (template id, model
/// version, rules hit, ...).
pub type Tags = BTreeMap<Cow<'static, str>, String>;

/// One node attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanRecord {
    pub request_id: RequestId,
    pub node: Arc<str>,
    pub kind: Arc<str>,
    /// 1 for the first attempt.
    pub attempt: u32,
    #[serde(flatten)]
    pub role: SpanRole,
    /// Microseconds since the Unix epoch when the attempt started.
    pub started_at_us: u64,
    /// Offsets from the request's start, in microseconds.
    pub start_us: u64,
    pub end_us: u64,
    pub status: SpanStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorRecord>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub tags: Tags,
    pub usage: Usage,
    /// What this attempt cost (the sum of its receipt amounts).
    pub cost: Decimal,
    pub worker: Arc<str>,
    /// Short summaries (shared with the upstream span that produced them).
    pub input_summary: Arc<str>,
    pub output_summary: Arc<str>,
}

impl SpanRecord {
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }
}

/// The tag holding a span's loop iteration (from 1), on every span of a
/// node in a loop's body (and of a fallback standing in for one, and of
/// the steps of its attempts).
pub const ITERATION_TAG: &str = "loop_iteration";

/// A span's loop iteration, when its node ran in a loop's body.
pub fn span_iteration(span: &SpanRecord) -> Option<u32> {
    span.tags.get(ITERATION_TAG).and_then(|v| v.parse().ok())
}
