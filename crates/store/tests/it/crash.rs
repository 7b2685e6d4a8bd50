//! Crash safety: SIGKILL a process writing under load, reopen the store:
//! it opens, passes `integrity_check`, and every request the child reported
//! as committed is there with all its spans.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;

use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{SqliteStore, StoreWriter, TraceStore, WriterOptions};
use glassbox_trace::{RequestId, TraceSink};

const CHILD_ENV: &str = "GLASSBOX_STORE_CRASH_CHILD";

/// The child: only does something when re-invoked by the test below.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let writer = StoreWriter::spawn(
        // The product's writer connection: checkpoints run on their own
        // thread, concurrently with the commits being killed.
        Box::new(
            SqliteStore::open(std::path::Path::new(&path))
                .unwrap()
                .with_background_checkpoints()
                .unwrap(),
        ),
        WriterOptions {
            queue_capacity: 1024,
            max_batch: 256,
            on_commit: Some(Arc::new(|ids: &[RequestId]| {
                let mut out = std::io::stdout().lock();
                for id in ids {
                    let _ = writeln!(out, "committed {id}");
                }
                let _ = out.flush();
            })),
            ..WriterOptions::default()
        },
    )
    .unwrap();
    // Bounded: the parent kills us long before this ends.
    for seed in 1..=2_000_000u64 {
        let (record, spans) = build(&SynthRequest::new(seed, 1_795_996_800_000_000 + seed));
        for s in spans {
            writer.span(Arc::new(s));
        }
        writer.request(Arc::new(record));
    }
}

#[test]
fn sigkill_mid_load_loses_no_reported_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::crash_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut reported = Vec::new();
    // Kill once a few thousand requests are committed: the writer is busy.
    while reported.len() < 3000 {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(id) = line.strip_prefix("committed ") {
                    reported.push(RequestId::from_str(id).unwrap());
                }
            }
            _ => panic!("child ended before the kill; got {} ids", reported.len()),
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    // Ids written to the pipe before the kill still count.
    for line in lines.map_while(Result::ok) {
        if let Some(id) = line.strip_prefix("committed ")
            && let Ok(id) = RequestId::from_str(id)
        {
            reported.push(id);
        }
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed");

    let mut store = SqliteStore::open(&path).unwrap();
    store.integrity_check().unwrap();
    let (requests, _) = store.counts().unwrap();
    assert!(requests >= reported.len() as u64);
    for id in &reported {
        let t = store
            .get(*id)
            .unwrap()
            .unwrap_or_else(|| panic!("{id} lost"));
        assert_eq!(t.spans.len() as u32, t.record.span_count, "{id} torn");
    }
}
