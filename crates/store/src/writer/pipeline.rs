//! The writer's threads: the encoder groups spans with their request and
//! encodes rows; the committer owns the store and commits batches; the
//! hand-off between them merges batches while a commit is under way.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use glassbox_trace::{RequestId, SpanRecord};

use super::msg::{CommitFailure, CommitHook, Committed, Counters, Encoded, Msg, Ticket};
use super::queue::Queue;
use crate::query::TraceStore;
use crate::redact::Redactor;
use crate::row::{RequestRow, SpanRow, encode, encode_span};

/// Groups spans with their request and encodes rows.
pub(super) struct Encoder {
    pub(super) redactor: Arc<Redactor>,
    pub(super) counters: Arc<Counters>,
    pub(super) max_batch: usize,
    /// Spans waiting for their request.
    pub(super) pending: HashMap<RequestId, Vec<Arc<SpanRecord>>>,
}

/// How much lower the encode and free threads run than the process
/// (Linux nice values; 19 is the lowest).
const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority by nice +10 from the process's
/// own (a process started under `nice` keeps the same gap; Linux; elsewhere,
/// or where refused, it keeps its priority). The encode and free threads
/// run so: when the CPU is contended, the engine's workers and the commit
/// thread (the writer's bottleneck) come first, and the bounded queue takes
/// up the lag. Measured: SQLite ingest +10–15% with requests in time order,
/// and the engine's `latency` workload within noise of tracing off.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(super) fn run_in_background() {
    // SAFETY: both calls take and return plain integers and touch no memory
    // of ours; on Linux, PRIO_PROCESS with a thread id changes that thread
    // only, and raising one's own nice value needs no privilege.
    let tid = unsafe { libc::gettid() };
    if let Ok(tid) = libc::id_t::try_from(tid) {
        // The thread starts with the nice value of the thread that made it.
        let current = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
        let low = (current + BACKGROUND_NICE).min(19);
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, low) };
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn run_in_background() {}

/// Owns the store; commits encoded batches in order.
pub(super) struct Committer {
    pub(super) store: Box<dyn TraceStore>,
    pub(super) counters: Arc<Counters>,
    pub(super) on_commit: Option<CommitHook>,
    /// Committed batches go here to be freed: a batch is ~10^5 strings, and
    /// freeing them is work the commit thread (the bottleneck) need not do.
    pub(super) spent: Option<SyncSender<Batch>>,
}

/// Between the encoder and the committer: at most one encoded batch waits,
/// and while the committer is busy the encoder adds to it (up to the batch
/// size) instead of queueing another. Each commit so takes everything encoded
/// during the previous one: that is what makes group commit effective. With
/// a queue of batches, each commit took the small batch cut right after the
/// previous one was handed over (measured on PostgreSQL, 8 clients waiting
/// for their commit: 2.1 requests per commit). Memory stays bounded: the
/// encoder waits (back-pressure) when the waiting batch is full.
pub(super) struct Handoff {
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
    pub(super) fn new(max_batch: usize) -> Handoff {
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
    pub(super) fn put(&self, mut batch: Batch) -> bool {
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

    /// Hands over a batch encoded by a caller of the writer
    /// ([`StoreWriter::write_encoded`](super::StoreWriter::write_encoded)),
    /// as [`Handoff::put`] does; `false` once the writer is closing (the
    /// encoder is done), so nothing is put where no commit will take it.
    pub(super) fn put_encoded(&self, batch: Batch) -> bool {
        if self.lock().encoder_done {
            return false;
        }
        self.put(batch)
    }

    /// The next batch to commit; `None` once the encoder is done and
    /// nothing waits.
    pub(super) fn take(&self) -> Option<Batch> {
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
pub(super) struct EncoderDone(pub(super) Arc<Handoff>);

impl Drop for EncoderDone {
    fn drop(&mut self) {
        self.0.lock().encoder_done = true;
        self.0.changed.notify_all();
    }
}

/// Marks the hand-off when the committer ends (dropped on its thread).
pub(super) struct CommitterGone(pub(super) Arc<Handoff>);

impl Drop for CommitterGone {
    fn drop(&mut self) {
        self.0.lock().committer_gone = true;
        self.0.changed.notify_all();
    }
}

#[derive(Default)]
pub(super) struct Batch {
    requests: Vec<RequestRow>,
    spans: Vec<SpanRow>,
    ids: Vec<RequestId>,
    acks: Vec<SyncSender<()>>,
    /// Completed when this batch has committed (or failed).
    tickets: Vec<Ticket>,
    records: usize,
}

impl Batch {
    /// A batch of requests encoded by a caller, each with the ticket
    /// `ticket` finds for it.
    pub(super) fn encoded(
        traces: Vec<Encoded>,
        mut ticket: impl FnMut(RequestId) -> Option<Ticket>,
    ) -> Batch {
        let mut batch = Batch {
            requests: Vec::with_capacity(traces.len()),
            spans: Vec::with_capacity(traces.iter().map(|t| t.spans.len()).sum()),
            ..Batch::default()
        };
        for Encoded { request, spans } in traces {
            batch.tickets.extend(ticket(request.request_id));
            batch.records += 1 + spans.len();
            batch.ids.push(request.request_id);
            batch.requests.push(request);
            batch.spans.extend(spans);
        }
        batch
    }

    pub(super) fn records(&self) -> usize {
        self.records
    }

    /// Moves `other`'s rows, acks and tickets to the end of this batch.
    pub(super) fn absorb(&mut self, other: &mut Batch) {
        self.requests.append(&mut other.requests);
        self.spans.append(&mut other.spans);
        self.ids.append(&mut other.ids);
        self.acks.append(&mut other.acks);
        self.tickets.append(&mut other.tickets);
        self.records += std::mem::take(&mut other.records);
    }
}

impl Encoder {
    pub(super) fn run(mut self, queue: &Queue, out: &Handoff) {
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

    pub(super) fn take(&mut self, msg: Msg, batch: &mut Batch) {
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
    pub(super) fn run(mut self, batches: &Handoff) {
        while let Some(batch) = batches.take() {
            self.commit(batch);
        }
        drop(self.spent.take());
    }

    pub(super) fn commit(&mut self, mut batch: Batch) {
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
        // Freed on the free thread, unless it is behind (it runs at nice
        // +10 and may get no CPU while the machine is busy): then here,
        // rather than wait for it with the next batch's callers waiting.
        if let Some(spent) = &self.spent {
            // A refused batch comes back in the error, dropped here.
            let _ = spent.try_send(batch);
        }
    }
}
