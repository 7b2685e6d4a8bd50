//! Where finished records go.
//!
//! The engine hands each span to the sink as its attempt finishes and the
//! request record when the request ends (also when it fails or is
//! cancelled). Calls happen on the executor, so implementations must return
//! quickly and never block: a persistent store pushes onto a bounded queue
//! drained by its own writer task.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::id::RequestId;
use crate::record::RequestRecord;
use crate::span::SpanRecord;

/// Receives records as they finish. Must not block.
pub trait TraceSink: Send + Sync {
    /// One attempt finished.
    fn span(&self, span: Arc<SpanRecord>);
    /// The request finished; every one of its spans was sent before.
    fn request(&self, record: Arc<RequestRecord>);
}

/// Drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopSink;

impl TraceSink for NoopSink {
    fn span(&self, _span: Arc<SpanRecord>) {}
    fn request(&self, _record: Arc<RequestRecord>) {}
}

#[derive(Debug, Default)]
struct Inner {
    requests: VecDeque<Arc<RequestRecord>>,
    spans: VecDeque<Arc<SpanRecord>>,
}

/// Keeps records in memory, optionally only the most recent ones.
#[derive(Debug, Default)]
pub struct MemorySink {
    inner: Mutex<Inner>,
    /// Most requests kept (spans: 64 per request kept); None keeps all.
    capacity: Option<usize>,
}

impl MemorySink {
    /// Keeps everything (for one-off runs and tests).
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    /// Keeps the most recent `requests` requests (and up to 64 spans each),
    /// so a long benchmark or server run does not grow without bound.
    pub fn bounded(requests: usize) -> MemorySink {
        MemorySink {
            inner: Mutex::default(),
            capacity: Some(requests.max(1)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves plain data behind;
        // keep serving it rather than poisoning every later request.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn requests(&self) -> Vec<Arc<RequestRecord>> {
        self.lock().requests.iter().cloned().collect()
    }

    pub fn record(&self, id: RequestId) -> Option<Arc<RequestRecord>> {
        self.lock()
            .requests
            .iter()
            .rev()
            .find(|r| r.request_id == id)
            .cloned()
    }

    /// Spans of one request, in the order they finished.
    pub fn spans_of(&self, id: RequestId) -> Vec<Arc<SpanRecord>> {
        self.lock()
            .spans
            .iter()
            .filter(|s| s.request_id == id)
            .cloned()
            .collect()
    }

    pub fn span_count(&self) -> usize {
        self.lock().spans.len()
    }

    pub fn request_count(&self) -> usize {
        self.lock().requests.len()
    }
}

impl TraceSink for MemorySink {
    fn span(&self, span: Arc<SpanRecord>) {
        let mut inner = self.lock();
        if let Some(cap) = self.capacity
            && inner.spans.len() >= cap.saturating_mul(64)
        {
            inner.spans.pop_front();
        }
        inner.spans.push_back(span);
    }

    fn request(&self, record: Arc<RequestRecord>) {
        let mut inner = self.lock();
        if let Some(cap) = self.capacity
            && inner.requests.len() >= cap
        {
            inner.requests.pop_front();
        }
        inner.requests.push_back(record);
    }
}

impl<T: TraceSink + ?Sized> TraceSink for Arc<T> {
    fn span(&self, span: Arc<SpanRecord>) {
        (**self).span(span);
    }
    fn request(&self, record: Arc<RequestRecord>) {
        (**self).request(record);
    }
}
