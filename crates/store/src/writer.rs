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
//! - A failed write is retried once, then counted (`failed_records`) and
//!   reported by the next `flush`/`close`, never swallowed.
//! - On Linux the encode and free threads run at nice +10, so under CPU
//!   contention requests and commits come first.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use glassbox_trace::{RequestId, RequestRecord, SpanRecord, TraceSink};
use serde::Serialize;
use tokio::sync::oneshot;

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
    /// A request, with the ticket of whoever awaits its commit.
    Request(Arc<RequestRecord>, Option<Ticket>),
    Flush(SyncSender<()>),
}

/// Where the committer reports the fate of one awaited request.
type Ticket = oneshot::Sender<Committed>;

/// What a ticket receives: `Ok`, or why its batch was not written.
type Committed = std::result::Result<(), CommitFailure>;

#[derive(Debug, Clone)]
struct CommitFailure {
    /// Records in the failed batch.
    records: u64,
    message: Arc<str>,
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

/// The bounded queue between the engine and the encoder thread.
///
/// Not a channel: a channel hands over one message per receive, so once it is
/// full every receive wakes a blocked sender for a single slot, and the two
/// threads ping-pong through the scheduler per record. Here the encoder takes
/// everything queued (up to a batch) under one lock, and blocked senders are
/// woken once per take.
struct Queue {
    state: Mutex<QueueState>,
    /// Signalled when a message arrives for a waiting encoder.
    not_empty: Condvar,
    /// Signalled when a take frees room for waiting senders.
    not_full: Condvar,
    capacity: usize,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Msg>,
    closed: bool,
    encoder_waiting: bool,
    senders_waiting: usize,
}

/// Why a push did not happen.
enum Refused {
    Full(Msg),
    Closed,
}

impl Queue {
    fn new(capacity: usize) -> Queue {
        Queue {
            state: Mutex::new(QueueState::default()),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `msg` and returns the depth after it, if there is room now.
    fn try_push(&self, msg: Msg) -> std::result::Result<usize, Refused> {
        let mut state = self.lock();
        if state.closed {
            return Err(Refused::Closed);
        }
        if state.items.len() >= self.capacity {
            return Err(Refused::Full(msg));
        }
        Ok(self.push_locked(&mut state, msg))
    }

    /// Waits for room, then queues `msg`; `None` if the queue closed.
    fn push_waiting(&self, msg: Msg) -> Option<usize> {
        let mut state = self.lock();
        while !state.closed && state.items.len() >= self.capacity {
            state.senders_waiting += 1;
            state = self
                .not_full
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.senders_waiting -= 1;
        }
        (!state.closed).then(|| self.push_locked(&mut state, msg))
    }

    fn push_locked(&self, state: &mut QueueState, msg: Msg) -> usize {
        state.items.push_back(msg);
        if state.encoder_waiting {
            state.encoder_waiting = false;
            self.not_empty.notify_one();
        }
        state.items.len()
    }

    /// Moves up to `max` queued messages into `out`, waiting for at least
    /// one; `false` once the queue is closed and empty.
    fn take(&self, out: &mut Vec<Msg>, max: usize) -> bool {
        let mut state = self.lock();
        while state.items.is_empty() {
            if state.closed {
                return false;
            }
            state.encoder_waiting = true;
            state = self
                .not_empty
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let n = state.items.len().min(max);
        out.extend(state.items.drain(..n));
        if state.senders_waiting > 0 {
            self.not_full.notify_all();
        }
        true
    }

    fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Refuses further pushes and wakes everyone; queued messages can still
    /// be taken.
    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }
}

/// A [`TraceSink`] that persists into a [`TraceStore`] off the request path.
pub struct StoreWriter {
    queue: Arc<Queue>,
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
        let redactor = Redactor::new(&options.redact)?;
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
            redactor,
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
        let done = EncoderDone(handoff);
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
            queue,
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

/// Groups spans with their request and encodes rows.
struct Encoder {
    redactor: Redactor,
    counters: Arc<Counters>,
    max_batch: usize,
    /// Spans waiting for their request.
    pending: HashMap<RequestId, Vec<Arc<SpanRecord>>>,
}

/// Nice value of the encode and free threads (Linux).
const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority to nice +10 (Linux; elsewhere,
/// or where refused, it keeps its priority). The encode and free threads
/// run so: when the CPU is contended, the engine's workers and the commit
/// thread (the writer's bottleneck) come first, and the bounded queue takes
/// up the lag. Measured: SQLite ingest +10–15% with requests in time order,
/// and the engine's `latency` workload within noise of tracing off.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn run_in_background() {
    // SAFETY: both calls take and return plain integers and touch no memory
    // of ours; on Linux, PRIO_PROCESS with a thread id changes that thread
    // only, and raising one's own nice value needs no privilege.
    let tid = unsafe { libc::gettid() };
    if let Ok(tid) = libc::id_t::try_from(tid) {
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn run_in_background() {}

/// Owns the store; commits encoded batches in order.
struct Committer {
    store: Box<dyn TraceStore>,
    counters: Arc<Counters>,
    on_commit: Option<CommitHook>,
    /// Committed batches go here to be freed: a batch is ~10^5 strings, and
    /// freeing them is work the commit thread (the bottleneck) need not do.
    spent: Option<SyncSender<Batch>>,
}

/// Between the encoder and the committer: at most one encoded batch waits,
/// and while the committer is busy the encoder adds to it (up to the batch
/// size) instead of queueing another. Each commit so takes everything encoded
/// during the previous one: that is what makes group commit effective. With
/// a queue of batches, each commit took the small batch cut right after the
/// previous one was handed over (measured on PostgreSQL, 8 clients waiting
/// for their commit: 2.1 requests per commit). Memory stays bounded: the
/// encoder waits (back-pressure) when the waiting batch is full.
struct Handoff {
    slot: Mutex<Slot>,
    changed: Condvar,
    max_batch: usize,
}

#[derive(Default)]
struct Slot {
    waiting: Option<Batch>,
    encoder_done: bool,
    committer_gone: bool,
}

impl Handoff {
    fn new(max_batch: usize) -> Handoff {
        Handoff {
            slot: Mutex::default(),
            changed: Condvar::new(),
            max_batch,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `batch` over, merged into the waiting one if it fits; waits
    /// while the waiting batch is full. `false` once the committer is gone.
    fn put(&self, mut batch: Batch) -> bool {
        let mut slot = self.lock();
        loop {
            if slot.committer_gone {
                return false;
            }
            match &mut slot.waiting {
                None => {
                    slot.waiting = Some(batch);
                    self.changed.notify_all();
                    return true;
                }
                Some(w) if w.records + batch.records <= self.max_batch => {
                    w.absorb(&mut batch);
                    return true;
                }
                Some(_) => {
                    slot = self
                        .changed
                        .wait(slot)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    /// The next batch to commit; `None` once the encoder is done and
    /// nothing waits.
    fn take(&self) -> Option<Batch> {
        let mut slot = self.lock();
        loop {
            if let Some(batch) = slot.waiting.take() {
                self.changed.notify_all();
                return Some(batch);
            }
            if slot.encoder_done {
                return None;
            }
            slot = self
                .changed
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Marks the hand-off when the encoder ends (dropped on its thread).
struct EncoderDone(Arc<Handoff>);

impl Drop for EncoderDone {
    fn drop(&mut self) {
        self.0.lock().encoder_done = true;
        self.0.changed.notify_all();
    }
}

/// Marks the hand-off when the committer ends (dropped on its thread).
struct CommitterGone(Arc<Handoff>);

impl Drop for CommitterGone {
    fn drop(&mut self) {
        self.0.lock().committer_gone = true;
        self.0.changed.notify_all();
    }
}

#[derive(Default)]
struct Batch {
    requests: Vec<RequestRow>,
    spans: Vec<SpanRow>,
    ids: Vec<RequestId>,
    acks: Vec<SyncSender<()>>,
    /// Completed when this batch has committed (or failed).
    tickets: Vec<Ticket>,
    records: usize,
}

impl Batch {
    /// Moves `other`'s rows, acks and tickets to the end of this batch.
    fn absorb(&mut self, other: &mut Batch) {
        self.requests.append(&mut other.requests);
        self.spans.append(&mut other.spans);
        self.ids.append(&mut other.ids);
        self.acks.append(&mut other.acks);
        self.tickets.append(&mut other.tickets);
        self.records += std::mem::take(&mut other.records);
    }
}

impl Encoder {
    fn run(mut self, queue: &Queue, out: &Handoff) {
        let mut msgs = Vec::with_capacity(self.max_batch);
        while queue.take(&mut msgs, self.max_batch) {
            // A batch ends at a flush, at the size limit, or when the queue
            // is drained; the hand-off may still merge it with the next ones
            // while the committer is busy (then a flush's ack comes with
            // that larger commit).
            // Sized up front: growing vectors of ~0.5 KB rows by doubling
            // copied them over and over (memmove was 7% of the writer).
            let mut batch = Batch {
                requests: Vec::with_capacity(msgs.len() / 2),
                spans: Vec::with_capacity(msgs.len()),
                ..Batch::default()
            };
            for msg in msgs.drain(..) {
                let flush = matches!(msg, Msg::Flush(_));
                self.take(msg, &mut batch);
                if (flush || batch.records >= self.max_batch)
                    && !out.put(std::mem::take(&mut batch))
                {
                    return;
                }
            }
            if (batch.records > 0 || !batch.acks.is_empty()) && !out.put(batch) {
                return;
            }
        }
        // Every sender is gone: write what is left, including spans whose
        // request never came, so nothing is lost silently.
        let mut batch = Batch::default();
        for (_, spans) in std::mem::take(&mut self.pending) {
            for (seq, s) in spans.iter().enumerate() {
                let seq = crate::row::i(seq as u64);
                batch.spans.push(encode_span(s, seq, None, &self.redactor));
            }
        }
        self.counters
            .orphans
            .fetch_add(batch.spans.len() as u64, Ordering::Relaxed);
        batch.records = batch.spans.len();
        if batch.records > 0 {
            let _ = out.put(batch);
        }
    }

    fn take(&mut self, msg: Msg, batch: &mut Batch) {
        match msg {
            Msg::Span(span) => self.pending.entry(span.request_id).or_default().push(span),
            Msg::Request(record, ticket) => {
                batch.tickets.extend(ticket);
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
    fn run(mut self, batches: &Handoff) {
        while let Some(batch) = batches.take() {
            self.commit(batch);
        }
        drop(self.spent.take());
    }

    fn commit(&mut self, mut batch: Batch) {
        let mut committed: Committed = Ok(());
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
                    let records = (batch.requests.len() + batch.spans.len()) as u64;
                    c.failed.fetch_add(records, Ordering::Relaxed);
                    let message = format!("{err} [{}]", err.code());
                    committed = Err(CommitFailure {
                        records,
                        message: message.as_str().into(),
                    });
                    *c.last_error.lock().unwrap_or_else(PoisonError::into_inner) = Some(message);
                }
            }
        }
        for ticket in batch.tickets.drain(..) {
            // The holder may have stopped waiting (client gone): fine.
            let _ = ticket.send(committed.clone());
        }
        for ack in batch.acks.drain(..) {
            let _ = ack.send(());
        }
        if let Some(spent) = &self.spent {
            let _ = spent.send(batch);
        }
    }
}
