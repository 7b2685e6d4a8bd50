//! Durability you can state (issue #14): kill -9 a loaded `glassbox serve`
//! and every request that was answered 200 has its trace in the store,
//! SQLite and PostgreSQL alike. Before responses waited for the commit,
//! 1,737 of 17,916 acknowledged traces were lost this way.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use glassbox_store::pg_temp::{TempPostgres, TempPostgresOptions};
use glassbox_store::{ListQuery, StoreUrl};
use glassbox_trace::RequestId;
use serde_json::json;

use crate::serve::{agent, serve_on};
use crate::support::wait_for_exit;

const CLIENTS: usize = 8;
/// How long the clients load the server before it is killed.
const LOAD: Duration = Duration::from_secs(2);

/// The request id of a run answered 200; `None` for anything else,
/// including a connection the kill broke.
fn run_ok(agent: &ureq::Agent, url: &str, body: &str) -> Option<String> {
    let mut reply = agent
        .post(format!("{url}/v1/topologies/moderation/runs"))
        .content_type("application/json")
        .send(body)
        .ok()?;
    if reply.status().as_u16() != 200 {
        return None;
    }
    let text = reply.body_mut().read_to_string().ok()?;
    let body: serde_json::Value = serde_json::from_str(&text).ok()?;
    body["request_id"].as_str().map(str::to_owned)
}

/// Loads a server on `store` with [`CLIENTS`] closed-loop clients, kills it
/// with SIGKILL mid-load, and returns the request ids answered 200.
fn acknowledged_then_killed(dir: &std::path::Path, store: &str) -> Vec<String> {
    let mut server = serve_on(dir, &[], store, &[]);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (acked, stop, url) = (acked.clone(), stop.clone(), server.url.clone());
            thread::spawn(move || {
                let agent = agent();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let body = json!({ "question": format!("client {c} asks the price, #{i}") });
                    // After the kill: refused or reset connections.
                    let Some(id) = run_ok(&agent, &url, &body.to_string()) else {
                        continue;
                    };
                    acked.lock().unwrap().push(id);
                }
            })
        })
        .collect();
    // Load for a while, with at least some answers in (a busy machine may
    // start slowly), then kill -9 while requests are in flight.
    let started = Instant::now();
    let until = started + Duration::from_secs(120);
    while started.elapsed() < LOAD || acked.lock().unwrap().len() < 50 {
        assert!(
            Instant::now() < until,
            "the server answered too few requests"
        );
        thread::sleep(Duration::from_millis(20));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    acked.lock().unwrap().clone()
}

/// The acknowledged ids that the store at `url` does not hold.
fn missing(url: &str, acked: &[String]) -> Vec<String> {
    let mut store = glassbox_store::open_store(&StoreUrl::parse(url).unwrap()).unwrap();
    store.integrity_check().unwrap();
    let stored: std::collections::HashSet<String> = store
        .list(&ListQuery {
            limit: u32::MAX,
            ..ListQuery::default()
        })
        .unwrap()
        .into_iter()
        .map(|r| r.request_id)
        .collect();
    acked
        .iter()
        .filter(|id| {
            // Listed ids are in the store's canonical spelling.
            let canonical = RequestId::from_str(id).unwrap().to_string();
            !stored.contains(&canonical)
        })
        .cloned()
        .collect()
}

/// Runs the crash under load against `url` and asserts no answered request
/// lost its trace.
fn assert_kill_9_loses_nothing(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let acked = acknowledged_then_killed(dir.path(), url);
    let missing = missing(url, &acked);
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged requests have no trace, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
}

/// A throwaway PostgreSQL: fails, never skips, when it is missing (as the
/// store's tests).
fn postgres() -> TempPostgres {
    TempPostgres::start(TempPostgresOptions::default()).unwrap_or_else(|e| {
        panic!("PostgreSQL tests need a throwaway server and it did not start: {e}")
    })
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_trace_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    assert_kill_9_loses_nothing(&format!(
        "sqlite://{}",
        dir.path().join("traces.db").display()
    ));
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_trace_postgres() {
    let pg = postgres();
    assert_kill_9_loses_nothing(&pg.create_database("crash").unwrap());
}

#[test]
fn sigterm_on_postgres_drains_and_exits_0() {
    let pg = postgres();
    let url = pg.create_database("term").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve_on(dir.path(), &[], &url, &[]);
    let agent = agent();
    assert!(run_ok(&agent, &server.url, r#"{"question": "hello"}"#).is_some());
    let killed = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", server.child.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = wait_for_exit(
        &mut server.child,
        Duration::from_secs(120),
        "the server did not exit after SIGTERM",
    );
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    // It aborted (134) closing its PostgreSQL read connections.
    assert_eq!(exit.code(), Some(0), "{log}");
    assert!(log.contains("stopped; 1 requests and"), "{log}");
}
