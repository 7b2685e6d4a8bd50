//! What the writer's threads hand each other: messages on the queue, the
//! tickets of awaited commits and their outcome, the shared counters, and
//! the commit hook. Below the writer, its queue and its pipeline alike.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

use glassbox_trace::{RequestId, RequestRecord, SpanRecord};
use tokio::sync::oneshot;

use crate::row::{RequestRow, SpanRow};

/// Called with the ids of requests just committed, on the writer thread.
pub type CommitHook = Arc<dyn Fn(&[RequestId]) + Send + Sync>;

#[derive(Default)]
pub(super) struct Counters {
    pub(super) max_depth: AtomicU64,
    pub(super) waits: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) spans: AtomicU64,
    pub(super) orphans: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(super) write_total: AtomicU64,
    pub(super) write_max: AtomicU64,
    pub(super) write_last: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) last_error: Mutex<Option<String>>,
}

pub(super) enum Msg {
    Span(Arc<SpanRecord>),
    /// A request, with the ticket of whoever awaits its commit.
    Request(Arc<RequestRecord>, Option<Ticket>),
    Flush(SyncSender<()>),
}

/// A finished request and its spans, encoded into rows (redacted, packed)
/// by [`StoreWriter::encode`](super::StoreWriter::encode) on the caller's
/// thread.
#[derive(Debug)]
pub struct Encoded {
    pub(super) request: RequestRow,
    pub(super) spans: Vec<SpanRow>,
}

/// Where the committer reports the fate of one awaited request.
pub(super) type Ticket = oneshot::Sender<Committed>;

/// What a ticket receives: `Ok`, or why its batch was not written.
pub(super) type Committed = std::result::Result<(), CommitFailure>;

#[derive(Debug, Clone)]
pub(super) struct CommitFailure {
    /// Records in the failed batch.
    pub(super) records: u64,
    pub(super) message: Arc<str>,
}
