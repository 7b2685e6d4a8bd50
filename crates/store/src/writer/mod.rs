//! The writer: records leave the request path through a bounded queue and are
//! written in batches off the request path, by threads in a pipeline: one
//! groups spans with their request, redacts and encodes rows; one owns the
//! store and commits the batches, so encoding the next batch overlaps
//! committing the last; one frees committed batches.
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
//! - [`StoreWriter::durable`] registers a request before it runs and returns
//!   a [`Durable`] ticket that completes when the transaction holding that
//!   request has committed (or with the commit's error). This is group
//!   commit: tickets never end a batch, so every request queued while the
//!   last batch was committing shares the next transaction, and a server
//!   that answers only after its ticket pays one commit per batch, not one
//!   per request. "Committed" is what the backend's commit promises: for
//!   SQLite (WAL, `synchronous = NORMAL`) the request survives a crash of
//!   this process, for PostgreSQL (`synchronous_commit = on`) its WAL is
//!   flushed by the database server.
//! - A caller that waits for the commit anyway (the OTLP receiver) can
//!   encode on its own thread ([`StoreWriter::encode`]) and hand the rows
//!   straight to the commit thread ([`StoreWriter::write_encoded`]):
//!   concurrent callers then encode in parallel, and their answers never
//!   wait for the encode thread (which runs at nice +10).
//! - A failed write is retried once, then counted (`failed_records`) and
//!   reported by the next `flush`/`close`, never swallowed.
//! - On Linux the encode and free threads run at nice +10, so under CPU
//!   contention requests and commits come first.
//!
//! This module holds the handle ([`StoreWriter`]), its options, counters and
//! tickets; `queue` the bounded queue the engine pushes onto; `pipeline` the
//! encoder, the committer and the hand-off between them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use glassbox_trace::{RequestId, RequestRecord, SpanRecord, TraceSink};
use serde::Serialize;
use tokio::sync::oneshot;

use crate::error::{Result, StoreError};
use crate::query::TraceStore;
use crate::redact::{RedactOptions, Redactor};

mod msg;
mod pipeline;
mod queue;

use pipeline::{Batch, Committer, CommitterGone, Encoder, EncoderDone, Handoff, run_in_background};
use queue::{Queue, Refused};

pub use msg::{CommitHook, Encoded};
use msg::{Committed, Counters, Msg, Ticket};

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

/// Requests whose commit someone awaits, by id ([`StoreWriter::durable`]).
#[derive(Default)]
struct Awaited {
    /// Entries in `tickets`: with none, a request does not take the lock.
    len: AtomicUsize,
    tickets: Mutex<HashMap<RequestId, Ticket>>,
}

impl Awaited {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Ticket>> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, id: RequestId, ticket: Ticket) {
        let mut tickets = self.lock();
        if tickets.insert(id, ticket).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn remove(&self, id: RequestId) -> Option<Ticket> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let ticket = self.lock().remove(&id);
        if ticket.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        ticket
    }
}

/// A request's commit, awaited: from [`StoreWriter::durable`], registered
/// before the request runs. Dropping it stops waiting (the request is
/// still written).
#[must_use = "a ticket does nothing unless its commit is awaited"]
pub struct Durable {
    id: RequestId,
    awaited: Arc<Awaited>,
    /// `None` once taken by [`Durable::wait`].
    rx: Option<oneshot::Receiver<Committed>>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable").field("id", &self.id).finish()
    }
}

impl Durable {
    pub fn request_id(&self) -> RequestId {
        self.id
    }

    /// Waits, without holding a thread, until the transaction holding the
    /// request has committed. Call once the request has ended: its record
    /// must already have been sent to the writer, or this answers
    /// [`StoreError::NotRecorded`] rather than wait for it forever.
    pub async fn committed(mut self) -> Result<()> {
        self.unsent()?;
        match self.rx.as_mut() {
            Some(rx) => settle(rx.await),
            None => Err(StoreError::WriterClosed),
        }
    }

    /// [`Durable::committed`] for a thread outside an async runtime.
    pub fn wait(mut self) -> Result<()> {
        self.unsent()?;
        match self.rx.take() {
            Some(rx) => settle(rx.blocking_recv()),
            None => Err(StoreError::WriterClosed),
        }
    }

    /// Fails if the request never reached the writer: its ticket is still
    /// registered.
    fn unsent(&mut self) -> Result<()> {
        match self.awaited.remove(self.id) {
            Some(_) => Err(StoreError::NotRecorded { request: self.id }),
            None => Ok(()),
        }
    }
}

fn settle(result: std::result::Result<Committed, oneshot::error::RecvError>) -> Result<()> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(f)) => Err(StoreError::WriteFailed {
            failed: f.records,
            last: f.message.to_string(),
        }),
        // The writer dropped the ticket unanswered: it is closed or stopped.
        Err(_) => Err(StoreError::WriterClosed),
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        // Not awaited after all (e.g. the client went away): unregister.
        let _ = self.awaited.remove(self.id);
    }
}

/// A [`TraceSink`] that persists into a [`TraceStore`] off the request path.
pub struct StoreWriter {
    /// The writer's redactor, shared so the API shows data through the same
    /// rules the store writes with (one pass, one configuration).
    redactor: Arc<Redactor>,
    queue: Arc<Queue>,
    /// To the commit thread, for batches callers encoded themselves.
    handoff: Arc<Handoff>,
    awaited: Arc<Awaited>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
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
        let redactor = Arc::new(Redactor::new(&options.redact)?);
        let capacity = options.queue_capacity.max(1);
        let queue = Arc::new(Queue::new(capacity));
        let counters = Arc::new(Counters::default());
        let kind = store.kind();
        let max_batch = options.max_batch.max(1);
        let handoff = Arc::new(Handoff::new(max_batch));
        let (spent, spent_rx) = sync_channel::<Batch>(1);
        let committer = Committer {
            store,
            counters: counters.clone(),
            on_commit: options.on_commit,
            spent: Some(spent),
        };
        let encoder = Encoder {
            redactor: redactor.clone(),
            counters: counters.clone(),
            max_batch,
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
        let free_thread = spawn(
            "gb-trace-free",
            Box::new(move || {
                run_in_background();
                spent_rx.into_iter().for_each(drop);
            }),
        )?;
        // Each side marks the hand-off when it ends, however it ends (even
        // if its thread never started), so the other never waits forever.
        let gone = CommitterGone(handoff.clone());
        let commit_thread = spawn(
            "gb-trace-commit",
            Box::new(move || {
                committer.run(&gone.0);
                drop(gone);
                let _ = free_thread.join();
            }),
        )?;
        let rx = queue.clone();
        let done = EncoderDone(handoff.clone());
        let thread = spawn(
            "gb-trace-encode",
            Box::new(move || {
                run_in_background();
                encoder.run(&rx, &done.0);
                drop(done);
                // The committer ends once it has drained the last batch.
                let _ = commit_thread.join();
            }),
        )?;
        Ok(StoreWriter {
            redactor,
            queue,
            handoff,
            awaited: Arc::default(),
            thread: Mutex::new(Some(thread)),
            counters,
            kind,
        })
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn send(&self, msg: Msg) -> Result<()> {
        let depth = match self.queue.try_push(msg) {
            Ok(depth) => Some(depth),
            Err(Refused::Full(msg)) => {
                self.counters.waits.fetch_add(1, Ordering::Relaxed);
                wait_for_room(|| self.queue.push_waiting(msg))
            }
            Err(Refused::Closed) => None,
        };
        let Some(depth) = depth else {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::WriterClosed);
        };
        self.counters
            .max_depth
            .fetch_max(depth as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Registers request `id`, which has not run yet: the returned ticket
    /// completes once the transaction holding the request has committed.
    /// Requests are written as before; the ticket only rides along, so many
    /// tickets share one commit (group commit).
    pub fn durable(&self, id: RequestId) -> Durable {
        let (tx, rx) = oneshot::channel();
        self.awaited.insert(id, tx);
        Durable {
            id,
            awaited: self.awaited.clone(),
            rx: Some(rx),
        }
    }

    /// Encodes a finished request and its spans into rows on the calling
    /// thread (redaction, JSON, packing: what the encode thread does for
    /// [`TraceSink::request`]), for [`StoreWriter::write_encoded`]. For
    /// callers that wait for the commit anyway (the OTLP receiver answers
    /// after it): their threads encode in parallel, and the writer's single
    /// encode thread is no longer in the way of every answer.
    pub fn encode<S: std::borrow::Borrow<SpanRecord>>(
        &self,
        record: &RequestRecord,
        spans: &[S],
    ) -> Encoded {
        let (request, spans) = crate::row::encode(record, spans, &self.redactor);
        Encoded { request, spans }
    }

    /// Hands requests encoded by [`StoreWriter::encode`] (each with its
    /// spans) straight to the commit thread, merged into the batch it
    /// commits next: each request commits in one transaction with its
    /// spans, as one sent with [`TraceSink::request`], and completes its
    /// [`Durable`] ticket. They skip the queue and the encode thread (both
    /// there for callers that must not wait); while the next batch is full
    /// this waits for room (back-pressure), as a full queue does.
    pub fn write_encoded(&self, traces: Vec<Encoded>) -> Result<()> {
        let batch = Batch::encoded(traces, |id| self.awaited.remove(id));
        let records = batch.records() as u64;
        if records == 0 || wait_for_room(|| self.handoff.put_encoded(batch)) {
            return Ok(());
        }
        // Closing: the batch and its tickets are dropped unwritten (their
        // holders hear `WriterClosed`).
        self.counters.failed.fetch_add(records, Ordering::Relaxed);
        Err(StoreError::WriterClosed)
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
        self.queue.close();
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
    /// The rules this writer redacts with, for showing data that is not
    /// read back from the store (topology specs, live answers) the same way.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn stats(&self) -> WriterStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WriterStats {
            queue_depth: self.queue.len() as u64,
            queue_capacity: self.queue.capacity as u64,
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
        // If the writer is closed, the ticket is dropped with the message
        // and its holder hears `WriterClosed`.
        let ticket = self.awaited.remove(record.request_id);
        let _ = self.send(Msg::Request(record, ticket));
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
