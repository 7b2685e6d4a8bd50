//! # glassbox-trace
//!
//! The record of what one request did: a [`RequestRecord`] (status, the path
//! that was generated and *why* each edge was taken, labels, summaries, the
//! [`Receipt`] and the [`Explanation`]) and one [`SpanRecord`] per node
//! attempt (timings, status, error, tags, [`Usage`], cost, worker).
//!
//! Records flow out of the engine through a [`TraceSink`] as they finish.
//! This crate only defines the model and an in-memory sink ([`MemorySink`]);
//! persistent stores (SQLite, PostgreSQL, OTLP export) implement the same
//! trait elsewhere, so the engine never depends on a database.
//!
//! Why this shape:
//! - Records are plain data with `serde` derives: the same types are printed
//!   by the CLI, returned by the API and written to stores.
//! - Identifiers that repeat across millions of spans (node ids, kinds,
//!   topology ids) are `Arc<str>`, so building a span is a reference-count
//!   bump rather than a string copy on the request path.
//! - Money is [`rust_decimal::Decimal`]: a receipt's lines add up to its
//!   total exactly, with no float drift.
//! - The [`critical_path`] (the chain of nodes that set a request's
//!   latency) is a pure function of the path and spans, so any holder of a
//!   record can compute it, old records included.
//! - Explanations keep their structured [`Fact`]s next to the rendered text,
//!   so a store can re-render them in another language later
//!   ([`explain::compose`]).

pub mod critical;
pub mod diff;
pub mod explain;
mod explain_place;
pub mod fact;
pub mod id;
pub mod looped;
pub mod placed;
pub mod price;
pub mod priority;
pub mod receipt;
pub mod record;
pub mod sink;
pub mod span;
pub mod tokens;

pub use critical::{CriticalPath, CriticalStep, ENCLOSES, critical_path};
pub use diff::{Divergence, GuardOutcome, TraceDiff};
pub use fact::{Explanation, Fact, Lang, NodeFacts, VersionChoice, VersionShare};
pub use id::RequestId;
pub use looped::{IterationRun, LoopRun, LoopStop, RanNode};
pub use placed::{FailedAttempt, FilterMiss, Placed, PlacedCandidate};
pub use price::{ClassPrices, ModelPrice, PriceTable};
pub use priority::{Priority, Scheduling};
pub use receipt::{Receipt, ReceiptLine, Unit};
pub use record::{
    ErrorRecord, ModelUse, NodeStatus, PathEdge, PathNode, PathRecord, RequestRecord, RequestStatus,
};
pub use sink::{MemorySink, NoopSink, TraceSink};
pub use span::{ITERATION_TAG, SpanRecord, SpanRole, SpanStatus, Tags, Usage, span_iteration};
pub use tokens::{TokenUsage, UsageError, UsageFormat};

/// Microseconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn unix_micros_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Shortens `text` to at most `max` characters, marking the cut with `…`.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => {
            let mut s = String::with_capacity(cut + 3);
            s.push_str(&text[..cut]);
            s.push('…');
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("hello", 10), "hello");
        assert_eq!(truncate("hello", 3), "hel…");
        assert_eq!(truncate("你好世界", 2), "你好…");
    }
}
