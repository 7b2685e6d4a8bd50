//! The writer: back-pressure, flush on shutdown, orphan spans, counters.

use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};

use glassbox_store::query::{
    Filter, ListQuery, RequestFacts, RequestSummary, SpanFacts, StoredTrace,
};
use glassbox_store::row::{RequestRow, SpanRow};
use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{Result, SqliteStore, StoreWriter, TraceStore, WriterOptions};
use glassbox_trace::{RequestId, TraceSink};

use crate::fixture::sqlite_writer;
use crate::suite::T0;

/// Wraps a store; each write waits for a token from the test.
pub struct Gated {
    pub inner: SqliteStore,
    pub gate: Mutex<Receiver<()>>,
}

impl TraceStore for Gated {
    fn kind(&self) -> &'static str {
        "gated"
    }
    fn schema_version(&mut self) -> Result<u32> {
        self.inner.schema_version()
    }
    fn write(&mut self, requests: &[RequestRow], spans: &[SpanRow]) -> Result<()> {
        let _ = self.gate.lock().unwrap().recv();
        self.inner.write(requests, spans)
    }
    fn get(&mut self, id: RequestId) -> Result<Option<StoredTrace>> {
        self.inner.get(id)
    }
    fn list(&mut self, q: &ListQuery) -> Result<Vec<RequestSummary>> {
        self.inner.list(q)
    }
    fn scan_requests(&mut self, f: &Filter, each: &mut dyn FnMut(RequestFacts<'_>)) -> Result<()> {
        self.inner.scan_requests(f, each)
    }
    fn scan_spans(&mut self, f: &Filter, each: &mut dyn FnMut(SpanFacts<'_>)) -> Result<()> {
        self.inner.scan_spans(f, each)
    }
    fn counts(&mut self) -> Result<(u64, u64)> {
        self.inner.counts()
    }
    fn integrity_check(&mut self) -> Result<()> {
        self.inner.integrity_check()
    }
}

pub fn send(writer: &StoreWriter, seed: u64) -> RequestId {
    let r = SynthRequest::new(seed, T0 + seed);
    let (record, spans) = build(&r);
    for s in spans {
        writer.span(Arc::new(s));
    }
    writer.request(Arc::new(record));
    r.id
}

#[test]
fn a_full_queue_makes_senders_wait_and_nothing_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (open_gate, gate) = channel();
    let store = Gated {
        inner: SqliteStore::open(&path).unwrap(),
        gate: Mutex::new(gate),
    };
    let writer = Arc::new(
        StoreWriter::spawn(
            Box::new(store),
            WriterOptions {
                queue_capacity: 2,
                max_batch: 1,
                ..WriterOptions::default()
            },
        )
        .unwrap(),
    );
    let w = writer.clone();
    let producer =
        std::thread::spawn(move || (0..20).map(|i| send(&w, i + 1)).collect::<Vec<_>>().len());
    // The writer is stuck on its first write; wait until a sender is too
    // and the queue is full. The encoder may still be moving records on to
    // the (stuck) committer when the first wait is counted, so both are
    // awaited together, with a deadline.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let stats = loop {
        let stats = writer.stats();
        if (stats.backpressure_waits > 0 && stats.queue_depth >= 2)
            || std::time::Instant::now() > deadline
        {
            break stats;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(stats.backpressure_waits > 0, "{stats:?}");
    assert!(stats.queue_depth >= 2, "{stats:?}");
    for _ in 0..1000 {
        let _ = open_gate.send(());
    }
    assert_eq!(producer.join().unwrap(), 20);
    writer.flush().unwrap();
    let stats = writer.close().unwrap();
    assert_eq!(stats.requests_written, 20);
    assert_eq!(stats.spans_written, 120);
    assert!(stats.backpressure_waits > 0);
    assert!(stats.write_us_max >= stats.write_us_last);
    assert_eq!(
        SqliteStore::open(&path).unwrap().counts().unwrap(),
        (20, 120)
    );
}

#[test]
fn a_full_queue_does_not_freeze_the_async_runtime() {
    // A frozen runtime never returns: watch it from another thread so the
    // test fails instead of hanging.
    let (done, finished) = channel();
    std::thread::spawn(move || {
        full_queue_on_a_one_worker_runtime();
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the runtime froze while a sender waited for queue room");
}

fn full_queue_on_a_one_worker_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (open_gate, gate) = channel();
    let store = Gated {
        inner: SqliteStore::open(&dir.path().join("t.db")).unwrap(),
        gate: Mutex::new(gate),
    };
    let writer = Arc::new(
        StoreWriter::spawn(
            Box::new(store),
            WriterOptions {
                queue_capacity: 2,
                max_batch: 1,
                ..WriterOptions::default()
            },
        )
        .unwrap(),
    );
    // One worker thread: if a blocked sender kept it, nothing else could run.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let ticks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    rt.block_on(async {
        let t = ticks.clone();
        tokio::spawn(async move {
            loop {
                t.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        });
        let w = writer.clone();
        let producer = tokio::spawn(async move {
            for i in 0..20 {
                send(&w, i + 1);
            }
        });
        while writer.stats().backpressure_waits == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // The sender is blocked on the full queue; the ticker still runs.
        let before = ticks.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > before);
        assert!(!producer.is_finished());
        for _ in 0..1000 {
            let _ = open_gate.send(());
        }
        producer.await.unwrap();
    });
    writer.flush().unwrap();
    assert_eq!(writer.close().unwrap().requests_written, 20);
}

#[test]
fn dropping_the_writer_flushes_everything_including_orphan_spans() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let writer = StoreWriter::spawn(
        Box::new(SqliteStore::open(&path).unwrap()),
        WriterOptions::default(),
    )
    .unwrap();
    for i in 0..50 {
        send(&writer, i + 1);
    }
    // Spans of a request that never finished.
    let (_, spans) = build(&SynthRequest::new(999, T0));
    for s in spans.into_iter().take(2) {
        writer.span(Arc::new(s));
    }
    drop(writer);
    let mut store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.counts().unwrap(), (50, 302));
}

#[test]
fn commit_hook_reports_ids_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let writer = StoreWriter::spawn(
        Box::new(SqliteStore::open(&path).unwrap()),
        WriterOptions {
            on_commit: Some(Arc::new(move |ids: &[RequestId]| {
                s2.lock().unwrap().extend_from_slice(ids)
            })),
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let ids: Vec<RequestId> = (0..10).map(|i| send(&writer, i + 1)).collect();
    writer.close().unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut want = ids;
    want.sort();
    assert_eq!(seen, want);
}

#[test]
fn a_closed_writer_reports_instead_of_dropping() {
    let (_dir, writer) = sqlite_writer();
    writer.close().unwrap();
    send(&writer, 1);
    assert_eq!(writer.flush().unwrap_err().code(), "store_writer_closed");
    assert!(writer.stats().failed_records > 0);
}

#[test]
fn checkpoints_run_in_the_background_while_the_writer_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let writer = glassbox_store::open_with(
        &glassbox_store::StoreUrl::Sqlite(path.clone()),
        WriterOptions {
            max_batch: 512,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    // ~10 MB of rows: more than SQLite's default checkpoint threshold (4 MB)
    // and far below the writer connection's own (64 MB).
    for seed in 1..=2_000 {
        send(&writer, seed);
    }
    writer.flush().unwrap();
    // Only a checkpoint moves pages from the WAL into the database file; no
    // connection has closed, so the background thread must have done it.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&path).unwrap().len() < 4 << 20 {
        assert!(
            std::time::Instant::now() < until,
            "the database file stayed at {} bytes",
            std::fs::metadata(&path).unwrap().len()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = writer.close().unwrap();
    assert_eq!(stats.requests_written, 2_000);
    let mut store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.counts().unwrap().0, 2_000);
    store.integrity_check().unwrap();
}

/// The nice value (field 19 of `/proc/<pid>/task/<tid>/stat`) of every
/// thread of this process named `prefix`.
#[cfg(target_os = "linux")]
fn nice_of_threads(prefix: &str) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        let name = name.trim().to_string();
        if name != prefix {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // After the `(comm)` field: state is field 3, nice is field 19.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i64 = rest.split(' ').nth(16).unwrap().parse().unwrap();
        out.push((name, nice));
    }
    out
}

#[cfg(target_os = "linux")]
#[test]
fn encode_and_free_threads_yield_to_requests_and_commits() {
    let (_dir, writer) = sqlite_writer();
    send(&writer, 1);
    writer.flush().unwrap();
    // Field 19 of the process's own stat line: the nice value it started with.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let base: i64 = rest.split(' ').nth(16).unwrap().parse().unwrap();
    let low = (base + 10).min(19);
    // Other tests run writers at the same time: every one must agree.
    for (name, want) in [
        ("gb-trace-encode", low),
        ("gb-trace-free", low),
        ("gb-trace-commit", base),
    ] {
        let found = nice_of_threads(name);
        assert!(!found.is_empty(), "no `{name}` thread");
        assert!(
            found.iter().all(|(_, n)| *n == want),
            "{name}: {found:?}, want {want}"
        );
    }
    writer.close().unwrap();
}
