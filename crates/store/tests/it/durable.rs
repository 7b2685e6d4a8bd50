//! Commit tickets ([`StoreWriter::durable`]): a ticket completes only once
//! the transaction holding its request has committed, concurrent tickets
//! share one commit (group commit), and a failed commit reaches the ticket.

use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use glassbox_store::query::{
    Filter, ListQuery, RequestFacts, RequestSummary, SpanFacts, StoredTrace,
};
use glassbox_store::row::{RequestRow, SpanRow};
use glassbox_store::synth::SynthRequest;
use glassbox_store::{Result, SqliteStore, StoreError, StoreWriter, TraceStore, WriterOptions};
use glassbox_trace::RequestId;

use crate::fixture::sqlite_writer;
use crate::suite::T0;
use crate::writer::{Gated, send};

/// A long bound for "it does complete" on a busy machine, not a timing test.
const EVENTUALLY: Duration = Duration::from_secs(60);

fn gated(path: &std::path::Path) -> (StoreWriter, std::sync::mpsc::Sender<()>) {
    let (open_gate, gate) = channel();
    let store = Gated {
        inner: SqliteStore::open(path).unwrap(),
        gate: Mutex::new(gate),
    };
    let writer = StoreWriter::spawn(Box::new(store), WriterOptions::default()).unwrap();
    (writer, open_gate)
}

/// Waits for `ticket` on a thread; the result arrives on the receiver.
fn await_on_thread(ticket: glassbox_store::Durable) -> std::sync::mpsc::Receiver<Result<()>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(ticket.wait());
    });
    rx
}

#[test]
fn a_ticket_completes_only_after_its_request_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (writer, open_gate) = gated(&path);
    let id = SynthRequest::new(1, T0 + 1).id;
    let ticket = writer.durable(id);
    assert_eq!(send(&writer, 1), id);
    let done = await_on_thread(ticket);
    // The commit is held at the gate: the ticket must still be waiting.
    assert!(matches!(
        done.recv_timeout(Duration::from_millis(300)),
        Err(RecvTimeoutError::Timeout)
    ));
    assert!(SqliteStore::open(&path).unwrap().get(id).unwrap().is_none());
    open_gate.send(()).unwrap();
    done.recv_timeout(EVENTUALLY).unwrap().unwrap();
    // Completed means committed: another connection sees it at once.
    assert!(SqliteStore::open(&path).unwrap().get(id).unwrap().is_some());
    drop(open_gate);
    writer.close().unwrap();
}

#[test]
fn concurrent_tickets_share_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (writer, open_gate) = gated(&path);
    let writer = Arc::new(writer);
    // Eight clients, each with a ticket, all queued while a first commit
    // is held at the gate.
    send(&writer, 100);
    let done: Vec<_> = (1..=8u64)
        .map(|seed| {
            let ticket = writer.durable(SynthRequest::new(seed, T0 + seed).id);
            send(&writer, seed);
            await_on_thread(ticket)
        })
        .collect();
    // Give the encoder time to take and encode everything queued.
    let until = std::time::Instant::now() + EVENTUALLY;
    while writer.stats().queue_depth > 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    for d in &done {
        assert!(matches!(
            d.try_recv(),
            Err(std::sync::mpsc::TryRecvError::Empty)
        ));
    }
    for _ in 0..100 {
        let _ = open_gate.send(());
    }
    for d in done {
        d.recv_timeout(EVENTUALLY).unwrap().unwrap();
    }
    let stats = writer.close().unwrap();
    assert_eq!(stats.requests_written, 9);
    // One commit per request would be 9. While the first commit is held,
    // everything encoded waits as one batch: 2 commits in all, or 3 if the
    // (low-priority) encoder was still encoding when the gate opened.
    assert!(stats.batches <= 3, "{stats:?}");
}

/// A store whose writes always fail.
struct Broken(SqliteStore);

impl TraceStore for Broken {
    fn kind(&self) -> &'static str {
        "broken"
    }
    fn schema_version(&mut self) -> Result<u32> {
        self.0.schema_version()
    }
    fn write(&mut self, _: &[RequestRow], _: &[SpanRow]) -> Result<()> {
        Err(StoreError::Integrity("the disk is full".into()))
    }
    fn get(&mut self, id: RequestId) -> Result<Option<StoredTrace>> {
        self.0.get(id)
    }
    fn list(&mut self, q: &ListQuery) -> Result<Vec<RequestSummary>> {
        self.0.list(q)
    }
    fn scan_requests(&mut self, f: &Filter, each: &mut dyn FnMut(RequestFacts<'_>)) -> Result<()> {
        self.0.scan_requests(f, each)
    }
    fn scan_spans(&mut self, f: &Filter, each: &mut dyn FnMut(SpanFacts<'_>)) -> Result<()> {
        self.0.scan_spans(f, each)
    }
    fn counts(&mut self) -> Result<(u64, u64)> {
        self.0.counts()
    }
    fn integrity_check(&mut self) -> Result<()> {
        self.0.integrity_check()
    }
}

#[test]
fn a_failed_commit_fails_its_tickets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Broken(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let writer = StoreWriter::spawn(Box::new(store), WriterOptions::default()).unwrap();
    let ticket = writer.durable(SynthRequest::new(1, T0 + 1).id);
    send(&writer, 1);
    let err = ticket.wait().unwrap_err();
    assert_eq!(err.code(), "store_write_failed", "{err}");
    assert!(err.to_string().contains("the disk is full"), "{err}");
    // Also counted for the next flush, as before.
    assert_eq!(writer.flush().unwrap_err().code(), "store_write_failed");
}

#[test]
fn a_ticket_whose_request_never_came_or_whose_writer_closed_says_so() {
    let (_dir, writer) = sqlite_writer();
    // Never sent: answered at once instead of waiting forever.
    let never = writer.durable(SynthRequest::new(1, T0 + 1).id);
    assert_eq!(never.wait().unwrap_err().code(), "store_not_recorded");
    // A dropped ticket unregisters; its request is written as usual.
    drop(writer.durable(SynthRequest::new(2, T0 + 2).id));
    send(&writer, 2);
    writer.flush().unwrap();
    // Sent after the writer closed: the ticket hears it.
    writer.close().unwrap();
    let late = writer.durable(SynthRequest::new(3, T0 + 3).id);
    send(&writer, 3);
    assert_eq!(late.wait().unwrap_err().code(), "store_writer_closed");
}

/// Encodes request `seed` on this thread, as the OTLP receiver does.
fn encoded(writer: &StoreWriter, seed: u64) -> glassbox_store::Encoded {
    let (record, spans) = glassbox_store::synth::build(&SynthRequest::new(seed, T0 + seed));
    writer.encode(&record, &spans)
}

#[test]
fn encoded_requests_commit_with_their_spans_before_their_tickets_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (writer, open_gate) = gated(&path);
    let (a, b) = (SynthRequest::new(1, T0 + 1), SynthRequest::new(2, T0 + 2));
    let ticket = writer.durable(a.id);
    let rows = vec![encoded(&writer, 1), encoded(&writer, 2)];
    writer.write_encoded(rows).unwrap();
    let done = await_on_thread(ticket);
    assert!(matches!(
        done.recv_timeout(Duration::from_millis(300)),
        Err(RecvTimeoutError::Timeout)
    ));
    assert!(
        SqliteStore::open(&path)
            .unwrap()
            .get(a.id)
            .unwrap()
            .is_none()
    );
    open_gate.send(()).unwrap();
    done.recv_timeout(EVENTUALLY).unwrap().unwrap();
    let mut reader = SqliteStore::open(&path).unwrap();
    for r in [&a, &b] {
        let stored = reader.get(r.id).unwrap().expect("committed");
        let (_, spans) = glassbox_store::synth::build(r);
        assert_eq!(stored.spans.len(), spans.len());
        assert_eq!(stored.record.span_count as usize, spans.len());
    }
    drop(open_gate);
    let stats = writer.close().unwrap();
    assert_eq!((stats.requests_written, stats.batches), (2, 1), "{stats:?}");
}

#[test]
fn encoded_requests_handed_to_a_closed_writer_fail_their_tickets() {
    let (_dir, writer) = sqlite_writer();
    writer.close().unwrap();
    let late = writer.durable(SynthRequest::new(3, T0 + 3).id);
    let err = writer.write_encoded(vec![encoded(&writer, 3)]).unwrap_err();
    assert_eq!(err.code(), "store_writer_closed");
    assert_eq!(late.wait().unwrap_err().code(), "store_writer_closed");
}
