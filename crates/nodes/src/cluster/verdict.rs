//! How a worker's failure is judged: **slow is not dead** (DESIGN.md,
//! "Serving and scale").
//!
//! - A refused connection (or one reset before any answer) means nothing
//!   listens there any more: the worker is **dead**, out of placement at
//!   once, panic mode included, until a call or probe succeeds again.
//! - An answer of HTTP 429 comes from a worker that is alive and full
//!   (its admission, or a call it cannot start in time): **busy**, even
//!   for a probe of an idle-looking worker, since its load report may lag.
//! - A timeout while the worker shows it works (this coordinator heard a
//!   progress event or a piece of text from it lately, or its fresh load
//!   says it runs or queues calls) is queueing behind real work, i.e.
//!   overload: it is **busy**, and nothing is counted against it. Overload
//!   is answered by admission (429, priorities), never by breakers.
//! - Anything else (a timeout with no sign of work, a 5xx, a stream cut
//!   short) **failed**: it counts on the worker's circuit breaker.
//!
//! Errors reach here as text (the transport's message inside a
//! [`NodeError`](glassbox_engine::NodeError)), so the checks look for the
//! operating system's and ureq's wording, lowercased.

/// What a failure says about the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing listens: out at once.
    Dead,
    /// Queued behind real work: not held against it.
    Busy,
    /// Counts on its breaker.
    Failed,
}

/// Judges a failure from its message and whether the worker was seen
/// working just before.
pub fn judge(error: &str, working: bool) -> Verdict {
    let e = error.to_ascii_lowercase();
    if e.contains("connection refused") || e.contains("os error 111") {
        Verdict::Dead
    } else if e.contains("answered http 429")
        || (working && (e.contains("timeout") || e.contains("timed out")))
    {
        Verdict::Busy
    } else {
        Verdict::Failed
    }
}

/// The reason kept for a dead worker.
pub fn refused_reason(error: &str) -> String {
    format!("refused a connection ({error})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_is_dead_slow_while_working_is_busy_else_failed() {
        let refused = "unavailable: 127.0.0.1: io: Connection refused (os error 111)";
        assert_eq!(
            judge(refused, true),
            Verdict::Dead,
            "dead even if busy before"
        );
        let silent = "unavailable: http://127.0.0.1:9/v1/chat/completions: reading the stream: timeout: per read";
        assert_eq!(judge(silent, true), Verdict::Busy);
        assert_eq!(
            judge(silent, false),
            Verdict::Failed,
            "silent and idle: hung"
        );
        let reset = "unavailable: 127.0.0.1 answered HTTP 500";
        assert_eq!(judge(reset, true), Verdict::Failed);
        let full = "unavailable: 127.0.0.1 answered HTTP 429";
        assert_eq!(judge(full, false), Verdict::Busy, "a full worker is alive");
        assert!(refused_reason(refused).starts_with("refused a connection ("));
    }
}
