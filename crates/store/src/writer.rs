//! The writer: records leave the request path through a bounded queue and are
//! written in batches off the request path, by two threads in a pipeline:
//! one groups spans with their request, redacts and encodes rows; the other
//! owns the store and commits the batches, so encoding the next batch
//! overlaps committing the last.
//!
//! - The engine's calls ([`TraceSink::span`], [`TraceSink::request`]) only
//!   push onto the queue. When the queue is full they wait for room
//!   (back-pressure, counted in `backpressure_waits`); nothing is dropped.
//!   On a multi-threaded tokio runtime the waiting worker hands its other
//!   tasks over first, so one full queue never freezes the reactor.
//! - Spans wait in the writer until their request arrives, then the request
//!   and its spans are committed in one transaction: a stored request is
//!   never missing spans, and a crash never leaves half of one.
//! - [`StoreWriter::flush`] returns once everything queued before it is
//!   committed; [`StoreWriter::close`] (or drop) flushes and joins the thread.
//! - A failed write is retried once, then counted (`failed_records`) and
//!   reported by the next `flush`/`close`, never swallowed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use glassbox_trace::{RequestId, RequestRecord, SpanRecord, TraceSink};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::query::TraceStore;
use crate::redact::{RedactOptions, Redactor};
use crate::row::{RequestRow, SpanRow, encode, encode_span};

/// Called with the ids of requests just committed, on the writer thread.
pub type CommitHook = Arc<dyn Fn(&[RequestId]) + Send + Sync>;

/// How the writer queues, batches and redacts.
#[derive(Clone)]
pub struct WriterOptions {
    /// Records (spans + requests) the queue holds before senders wait.
    pub queue_capacity: usize,
    /// Most records written in one transaction.
    pub max_batch: usize,
    pub redact: RedactOptions,
    /// Told about each committed batch of requests (tests, progress).
    pub on_commit: Option<CommitHook>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            queue_capacity: 65_536,
            max_batch: 8_192,
            redact: RedactOptions::default(),
            on_commit: None,
        }
    }
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("queue_capacity", &self.queue_capacity)
            .field("max_batch", &self.max_batch)
            .field("redact", &self.redact)
            .finish_non_exhaustive()
    }
}

/// Counters, readable at any time (e.g. for `/metrics`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WriterStats {
    /// Records waiting in the queue now.
    pub queue_depth: u64,
    pub queue_capacity: u64,
    /// Deepest the queue has been.
    pub max_queue_depth: u64,
    /// Sends that had to wait because the queue was full.
    pub backpressure_waits: u64,
    pub requests_written: u64,
    pub spans_written: u64,
    /// Spans whose request never arrived, written at shutdown without one.
    pub orphan_spans: u64,
    pub batches: u64,
    /// Commit latency of batches, microseconds.
    pub write_us_total: u64,
    pub write_us_max: u64,
    pub write_us_last: u64,
    /// Records that could not be written after a retry.
    pub failed_records: u64,
}

#[derive(Default)]
struct Counters {
    depth: AtomicU64,
    max_depth: AtomicU64,
    waits: AtomicU64,
    requests: AtomicU64,
    spans: AtomicU64,
    orphans: AtomicU64,
    batches: AtomicU64,
    write_total: AtomicU64,
    write_max: AtomicU64,
    write_last: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

enum Msg {
    Span(Arc<SpanRecord>),
    Request(Arc<RequestRecord>),
    Flush(SyncSender<()>),
}

/// A [`TraceSink`] that persists into a [`TraceStore`] off the request path.
pub struct StoreWriter {
    tx: Mutex<Option<SyncSender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
    capacity: u64,
    kind: &'static str,
}

impl std::fmt::Debug for StoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter")
            .field("kind", &self.kind)
            .field("stats", &self.stats())
            .finish()
    }
}

impl StoreWriter {
    /// Starts the writer thread, which owns `store` from now on.
    pub fn spawn(store: Box<dyn TraceStore>, options: WriterOptions) -> Result<StoreWriter> {
        let redactor = Redactor::new(&options.redact)?;
        let capacity = options.queue_capacity.max(1);
        let (tx, rx) = sync_channel(capacity);
        let counters = Arc::new(Counters::default());
        let kind = store.kind();
        // Two encoded batches in flight at most: memory stays bounded and the
        // encoder waits (back-pressure) when the store falls behind.
        let (batches_tx, batches_rx) = sync_channel::<Batch>(1);
        let committer = Committer {
            store,
            counters: counters.clone(),
            on_commit: options.on_commit,
        };
        let encoder = Encoder {
            redactor,
            counters: counters.clone(),
            max_batch: options.max_batch.max(1),
            pending: HashMap::new(),
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|source| StoreError::Io {
                    context: "starting the trace writer threads".into(),
                    source,
                })
        };
        let commit_thread = spawn(
            "glassbox-trace-commit",
            Box::new(move || committer.run(batches_rx)),
        )?;
        let thread = spawn(
            "glassbox-trace-encode",
            Box::new(move || {
                encoder.run(rx, &batches_tx);
                drop(batches_tx);
                // The committer ends once it has drained the last batch.
                let _ = commit_thread.join();
            }),
        )?;
        Ok(StoreWriter {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            counters,
            capacity: capacity as u64,
            kind,
        })
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn sender(&self) -> Option<SyncSender<Msg>> {
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn send(&self, msg: Msg) -> Result<()> {
        let Some(tx) = self.sender() else {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::WriterClosed);
        };
        let depth = self.counters.depth.fetch_add(1, Ordering::Relaxed) + 1;
        self.counters.max_depth.fetch_max(depth, Ordering::Relaxed);
        let sent = match tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(msg)) => {
                self.counters.waits.fetch_add(1, Ordering::Relaxed);
                wait_for_room(|| tx.send(msg).map_err(|_| StoreError::WriterClosed))
            }
            Err(TrySendError::Disconnected(_)) => Err(StoreError::WriterClosed),
        };
        if sent.is_err() {
            self.counters.depth.fetch_sub(1, Ordering::Relaxed);
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }

    /// Waits until everything sent before this call is committed; reports
    /// records that could not be written since the last flush.
    pub fn flush(&self) -> Result<()> {
        let (ack_tx, ack_rx) = sync_channel(1);
        self.send(Msg::Flush(ack_tx))?;
        ack_rx.recv().map_err(|_| StoreError::WriterClosed)?;
        self.take_failure()
    }

    /// Flushes, stops the thread and returns the final counters.
    pub fn close(&self) -> Result<WriterStats> {
        let tx = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(tx);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            return Err(StoreError::WriterClosed);
        }
        self.take_failure()?;
        Ok(self.stats())
    }

    fn take_failure(&self) -> Result<()> {
        let failed = self.counters.failed.swap(0, Ordering::Relaxed);
        if failed == 0 {
            return Ok(());
        }
        let last = self
            .counters
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the writer stopped".into());
        Err(StoreError::WriteFailed { failed, last })
    }

    /// Current counters.
    pub fn stats(&self) -> WriterStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WriterStats {
            queue_depth: get(&c.depth),
            queue_capacity: self.capacity,
            max_queue_depth: get(&c.max_depth),
            backpressure_waits: get(&c.waits),
            requests_written: get(&c.requests),
            spans_written: get(&c.spans),
            orphan_spans: get(&c.orphans),
            batches: get(&c.batches),
            write_us_total: get(&c.write_total),
            write_us_max: get(&c.write_max),
            write_us_last: get(&c.write_last),
            failed_records: get(&c.failed),
        }
    }
}

/// Runs a blocking wait for queue room. On a multi-threaded tokio runtime
/// the worker thread is handed over first (`block_in_place`), so the other
/// requests it was running move to another thread instead of stalling
/// behind the trace queue.
fn wait_for_room<T>(wait: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

impl TraceSink for StoreWriter {
    fn span(&self, span: Arc<SpanRecord>) {
        // Errors are counted in `failed_records` and surface at flush/close.
        let _ = self.send(Msg::Span(span));
    }

    fn request(&self, record: Arc<RequestRecord>) {
        let _ = self.send(Msg::Request(record));
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Groups spans with their request and encodes rows.
struct Encoder {
    redactor: Redactor,
    counters: Arc<Counters>,
    max_batch: usize,
    /// Spans waiting for their request.
    pending: HashMap<RequestId, Vec<Arc<SpanRecord>>>,
}

/// Owns the store; commits encoded batches in order.
struct Committer {
    store: Box<dyn TraceStore>,
    counters: Arc<Counters>,
    on_commit: Option<CommitHook>,
}

#[derive(Default)]
struct Batch {
    requests: Vec<RequestRow>,
    spans: Vec<SpanRow>,
    ids: Vec<RequestId>,
    acks: Vec<SyncSender<()>>,
    records: usize,
}

impl Encoder {
    fn run(mut self, rx: Receiver<Msg>, out: &SyncSender<Batch>) {
        while let Ok(first) = rx.recv() {
            let mut batch = Batch::default();
            self.take(first, &mut batch);
            while batch.records < self.max_batch
                && batch.acks.is_empty()
                && let Ok(msg) = rx.try_recv()
            {
                self.take(msg, &mut batch);
            }
            if out.send(batch).is_err() {
                return;
            }
        }
        // Every sender is gone: write what is left, including spans whose
        // request never came, so nothing is lost silently.
        let mut batch = Batch::default();
        let empty = RequestRow::empty();
        for (_, spans) in std::mem::take(&mut self.pending) {
            for (seq, s) in spans.iter().enumerate() {
                let seq = crate::row::i(seq as u64);
                batch
                    .spans
                    .push(encode_span(s, seq, &empty, &self.redactor));
            }
        }
        self.counters
            .orphans
            .fetch_add(batch.spans.len() as u64, Ordering::Relaxed);
        batch.records = batch.spans.len();
        if batch.records > 0 {
            let _ = out.send(batch);
        }
    }

    fn take(&mut self, msg: Msg, batch: &mut Batch) {
        self.counters.depth.fetch_sub(1, Ordering::Relaxed);
        match msg {
            Msg::Span(span) => self.pending.entry(span.request_id).or_default().push(span),
            Msg::Request(record) => {
                let spans = self.pending.remove(&record.request_id).unwrap_or_default();
                let (row, span_rows) = encode(&record, &spans, &self.redactor);
                batch.records += 1 + span_rows.len();
                batch.requests.push(row);
                batch.spans.extend(span_rows);
                batch.ids.push(record.request_id);
            }
            Msg::Flush(ack) => batch.acks.push(ack),
        }
    }
}

impl Committer {
    fn run(mut self, batches: Receiver<Batch>) {
        while let Ok(batch) = batches.recv() {
            self.commit(batch);
        }
    }

    fn commit(&mut self, batch: Batch) {
        if !batch.requests.is_empty() || !batch.spans.is_empty() {
            let started = Instant::now();
            let mut result = self.store.write(&batch.requests, &batch.spans);
            if result.is_err() {
                // One retry covers a transient lock or connection blip.
                result = self.store.write(&batch.requests, &batch.spans);
            }
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let c = &self.counters;
            c.batches.fetch_add(1, Ordering::Relaxed);
            c.write_total.fetch_add(us, Ordering::Relaxed);
            c.write_max.fetch_max(us, Ordering::Relaxed);
            c.write_last.store(us, Ordering::Relaxed);
            match result {
                Ok(()) => {
                    c.requests
                        .fetch_add(batch.requests.len() as u64, Ordering::Relaxed);
                    c.spans
                        .fetch_add(batch.spans.len() as u64, Ordering::Relaxed);
                    if let Some(hook) = &self.on_commit
                        && !batch.ids.is_empty()
                    {
                        hook(&batch.ids);
                    }
                }
                Err(err) => {
                    c.failed.fetch_add(
                        (batch.requests.len() + batch.spans.len()) as u64,
                        Ordering::Relaxed,
                    );
                    *c.last_error.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(format!("{err} [{}]", err.code()));
                }
            }
        }
        for ack in batch.acks {
            let _ = ack.send(());
        }
    }
}
