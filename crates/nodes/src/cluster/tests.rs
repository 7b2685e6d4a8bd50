//! The dispatcher's bookkeeping, on a pool filled by hand (no worker is
//! called here; crates/server/tests/it/cluster.rs runs real ones).

use glassbox_cluster::member::{now_ms, now_secs};
use glassbox_cluster::{Hardware, Load, WorkerRecord};

use super::*;

fn pool(ids: &[&str]) -> Pool {
    let pool = Pool::new();
    for id in ids {
        pool.upsert_record(WorkerRecord {
            id: (*id).into(),
            address: format!("http://127.0.0.{}:9", ids.len()),
            engine: "glassbox".into(),
            hardware: Hardware::default(),
            models: vec!["smollm2".into()],
            node_kinds: vec!["llm_inference".into()],
            labels: Default::default(),
            started_at: 0,
        });
        pool.set_load(
            id,
            Load {
                at: now_secs(),
                ..Load::default()
            },
        );
    }
    pool
}

fn llm() -> Spec<'static> {
    Spec {
        kind: "llm_inference",
        model: Some("smollm2"),
        affinity: None,
    }
}

fn chosen(d: &Dispatcher, spec: &Spec<'_>) -> String {
    d.choose(spec, &[]).map(|c| c.worker).unwrap_or_default()
}

#[test]
fn calls_in_flight_steer_the_next_call_elsewhere() {
    let d = Dispatcher::new(pool(&["a", "b"]), DispatchOptions::default());
    let first = chosen(&d, &llm());
    let held = d.begin(&first);
    let second = chosen(&d, &llm());
    assert_ne!(
        first, second,
        "the worker with a call in flight counts as busier"
    );
    drop(held);
    let _other = d.begin(&second);
    assert_eq!(
        chosen(&d, &llm()),
        first,
        "the call ended, so its worker is free again"
    );
}

#[test]
fn a_call_the_load_report_already_counts_is_not_counted_twice() {
    let p = pool(&["a"]);
    let d = Dispatcher::new(p.clone(), DispatchOptions::default());
    let queue = |d: &Dispatcher| {
        let c = d.choose(&llm(), &[]).map_err(|p| p.why_none()).unwrap();
        c.placement.candidates[0].queue
    };
    let _call = d.begin("a");
    assert_eq!(queue(&d), Some(1), "sent since the last report: pending");
    // The next report, measured after the call started (within the same
    // second), counts it as running: the queue is still one call.
    p.set_load(
        "a",
        Load {
            running: 1,
            at: now_secs(),
            at_ms: Some(now_ms() + 1),
            ..Load::default()
        },
    );
    assert_eq!(queue(&d), Some(1), "counted once, as running");
}

#[test]
fn a_failed_probe_keeps_a_worker_out_until_one_passes() {
    let d = Dispatcher::new(pool(&["a", "b"]), DispatchOptions::default());
    d.probed("a", Err("timed out".into()));
    let why = d.unhealthy("a").unwrap();
    assert_eq!(why, "last liveness probe failed: timed out");
    for _ in 0..4 {
        assert_eq!(chosen(&d, &llm()), "b");
    }
    d.probed("a", Ok(()));
    assert_eq!(d.unhealthy("a"), None);
}

#[test]
fn a_probe_that_timed_out_is_suspect_not_dead_and_panic_mode_still_tries_it() {
    // Slow is not dead: the only worker left for a model, silent to one
    // probe on a loaded machine, still gets the call.
    let d = Dispatcher::new(pool(&["a"]), DispatchOptions::default());
    d.probed("a", Err("unavailable: 127.0.0.1:9: timeout: global".into()));
    assert!(d.unhealthy("a").is_some());
    let c = d.choose(&llm(), &[]).map_err(|p| p.why_none()).unwrap();
    assert_eq!(c.placement.rule, glassbox_cluster::Rule::Panic);
    // A probe refused is another matter: nothing listens there.
    d.probed(
        "a",
        Err("unavailable: 127.0.0.1: io: Connection refused (os error 111)".into()),
    );
    assert!(d.unhealthy("a").unwrap().starts_with("dead: refused"));
    let none = d.choose(&llm(), &[]).err().unwrap();
    assert!(
        none.why_none().contains("dead: refused"),
        "{}",
        none.why_none()
    );
}

#[test]
fn a_probe_answered_429_meets_a_full_worker_not_a_dead_one() {
    let d = Dispatcher::new(pool(&["a", "b"]), DispatchOptions::default());
    let full = "unavailable: 127.0.0.1 answered HTTP 429";
    // Idle by its (lagging) load report, never heard: still alive.
    for _ in 0..DispatchOptions::default().breaker.failures_to_open + 1 {
        d.probed("a", Err(full.into()));
    }
    assert_eq!(d.unhealthy("a"), None, "a full worker stays in the pool");
    // A worker an earlier probe found dead is back once it answers at all.
    d.probed("b", Err("timed out".into()));
    assert!(d.unhealthy("b").is_some());
    d.probed("b", Err(full.into()));
    assert_eq!(d.unhealthy("b"), None);
}

#[test]
fn consecutive_call_failures_open_the_circuit() {
    let options = DispatchOptions::default();
    let d = Dispatcher::new(pool(&["a", "b"]), options);
    for _ in 0..options.breaker.failures_to_open {
        assert_eq!(d.unhealthy("a"), None);
        d.failed("a", "127.0.0.1 answered HTTP 500");
    }
    let why = d.unhealthy("a").unwrap();
    assert!(
        why.starts_with("circuit open after 3 consecutive failures"),
        "{why}"
    );
    let c = d.choose(&llm(), &[]).map_err(|p| p.why_none()).unwrap();
    assert_eq!(c.worker, "b");
    let fact = placed_fact(&c, Some("smollm2"), None, &[]);
    let a = fact.candidates.iter().find(|x| x.worker == "a").unwrap();
    assert_eq!(a.failed[0].filter, "health");
}

#[test]
fn slow_is_not_dead_timeouts_while_working_count_nothing() {
    let options = DispatchOptions::default();
    let d = Dispatcher::new(pool(&["a", "b"]), options);
    let silent = "unavailable: http://127.0.0.1:9/v1/chat/completions: reading the stream: timeout: per read";
    // Heard working (a progress event): its timeouts are overload.
    d.heard("a");
    for _ in 0..options.breaker.failures_to_open + 2 {
        assert!(!d.failed("a", silent), "a busy worker's timeout counted");
        d.probed("a", Err("timeout: global".into()));
    }
    assert_eq!(d.unhealthy("a"), None, "a busy worker stays in the pool");
    // Never heard, idle load: the same silence opens its circuit.
    for _ in 0..options.breaker.failures_to_open {
        assert!(d.failed("b", silent));
    }
    assert!(d.unhealthy("b").unwrap().starts_with("circuit open"));
}

#[test]
fn a_breaker_never_empties_the_pool_but_a_dead_worker_leaves_at_once() {
    let options = DispatchOptions::default();
    let d = Dispatcher::new(pool(&["a", "b"]), options);
    for _ in 0..options.breaker.failures_to_open {
        d.failed("a", "127.0.0.1 answered HTTP 500");
        d.failed("b", "127.0.0.1 answered HTTP 500");
    }
    // Both circuits open, both alive: panic mode keeps routing.
    let c = d.choose(&llm(), &[]).map_err(|p| p.why_none()).unwrap();
    assert_eq!(c.placement.rule, glassbox_cluster::Rule::Panic);
    // `a` refuses connections: dead, never chosen, even in panic.
    d.failed(
        "a",
        "unavailable: 127.0.0.1: io: Connection refused (os error 111)",
    );
    assert!(
        d.unhealthy("a")
            .unwrap()
            .starts_with("dead: refused a connection")
    );
    for _ in 0..3 {
        assert_eq!(chosen(&d, &llm()), "b");
    }
    d.failed(
        "b",
        "unavailable: 127.0.0.1: io: Connection refused (os error 111)",
    );
    let none = d.choose(&llm(), &[]).err().unwrap();
    assert!(
        none.why_none().contains("dead: refused"),
        "{}",
        none.why_none()
    );
    // A call that succeeds brings it back.
    d.succeeded("b", "smollm2", "cpu", None);
    assert_eq!(chosen(&d, &llm()), "b");
}

#[test]
fn failovers_spend_the_retry_budget() {
    let mut options = DispatchOptions::default();
    options.budget.ratio = 0.5;
    options.budget.min_per_second = 0.1;
    let d = Dispatcher::new(pool(&["a"]), options);
    for _ in 0..4 {
        d.called();
    }
    // 0.5 × 4 + 0.1 × 10 = 3 failovers.
    for _ in 0..3 {
        d.may_retry().unwrap();
    }
    let spent = d.may_retry().unwrap_err().to_string();
    assert!(spent.contains("3 failovers for 4 calls"), "{spent}");
}

#[test]
fn an_affinity_group_binds_per_request() {
    let d = Dispatcher::new(pool(&["a", "b"]), DispatchOptions::default());
    let r1 = RequestId::new();
    let r2 = RequestId::new();
    let in_r1 = Spec {
        affinity: Some(("gpu-a", r1)),
        ..llm()
    };
    let first = chosen(&d, &in_r1);
    // Make the bound worker the busier one: the group still stays.
    let _busy = d.begin(&first);
    let _busier = d.begin(&first);
    assert_eq!(chosen(&d, &in_r1), first);
    let in_r2 = Spec {
        affinity: Some(("gpu-a", r2)),
        ..llm()
    };
    assert_ne!(
        chosen(&d, &in_r2),
        first,
        "another request binds on its own"
    );
}

#[test]
fn a_worker_that_left_is_forgotten_and_never_chosen() {
    let p = pool(&["a", "b"]);
    let d = Dispatcher::new(p.clone(), DispatchOptions::default());
    d.failed("a", "127.0.0.1 answered HTTP 500");
    p.remove("a");
    for _ in 0..3 {
        assert_eq!(chosen(&d, &llm()), "b");
    }
    assert_eq!(d.unhealthy("a"), None, "its breaker went with it");
    p.remove("b");
    let none = d.choose(&llm(), &[]).err().unwrap();
    assert_eq!(none.why_none(), "the pool has no workers");
}

#[test]
fn a_chosen_worker_is_reached_at_its_address_under_v1() {
    let d = Dispatcher::new(pool(&["a"]), DispatchOptions::default());
    let c = d.choose(&llm(), &[]).map_err(|p| p.why_none()).unwrap();
    assert_eq!(c.endpoint.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(c.endpoint.model, "smollm2");
    assert!(
        c.endpoint
            .client()
            .policy()
            .check_static("127.0.0.1")
            .is_ok()
    );
    assert!(
        c.endpoint
            .client()
            .policy()
            .check_static("127.0.0.2")
            .is_err()
    );
}

/// A fake worker for this unit test only: answers one streamed chat with
/// a piece every 20 ms for up to 10 s, and reports how many it wrote
/// before the client closed the connection.
fn fake_streaming_worker() -> (String, std::sync::mpsc::Receiver<usize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 8192];
        let _ = conn.read(&mut buf);
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
        let _ = conn.write_all(head.as_bytes());
        let piece = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
        for n in 0..500 {
            if conn
                .write_all(piece.as_bytes())
                .and_then(|()| conn.flush())
                .is_err()
            {
                let _ = tx.send(n);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = tx.send(500);
    });
    (format!("http://{addr}"), rx)
}

#[test]
fn a_stream_abandoned_by_its_caller_closes_the_worker_connection() {
    let (address, written) = fake_streaming_worker();
    let timeouts = WorkerTimeouts::default();
    let endpoint = Endpoint::for_worker(
        &address,
        "m",
        Client::for_worker("127.0.0.1", timeouts),
        timeouts,
    );
    let mut seen = 0;
    let err = endpoint
        .chat_streamed(serde_json::json!([]), &serde_json::json!({}), &mut |_| {
            seen += 1;
            seen < 3
        })
        .unwrap_err();
    assert!(err.to_string().contains("abandoned"), "{err}");
    assert!(!err.retryable(), "an abandoned call is not failed over");
    let n = written.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        n < 500,
        "the worker saw the connection close after {n} pieces"
    );
}

/// A fake worker (this unit test's only): accepts one chat, sends progress
/// comments for `quiet` ms in all (each well inside the silence limit), then
/// one piece of text and the end.
fn fake_queued_worker(quiet: u64) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 8192];
        let _ = conn.read(&mut buf);
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
        let _ = conn.write_all(head.as_bytes());
        for _ in 0..quiet / 200 {
            let _ = conn.write_all(b": queued: 1 running, 3 waiting\n\n");
            let _ = conn.flush();
            std::thread::sleep(Duration::from_millis(200));
        }
        let end = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
                   data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n\
                   data: [DONE]\n\n";
        let _ = conn.write_all(end.as_bytes());
    });
    format!("http://{addr}")
}

#[test]
fn progress_comments_keep_a_queued_call_alive_past_the_silence_limit() {
    let address = fake_queued_worker(1_600);
    // Silence limit 1 s; the call waits 1.6 s in all before its text.
    let timeouts = WorkerTimeouts {
        silence: Duration::from_secs(1),
        total: Duration::from_secs(60),
    };
    let endpoint = Endpoint::for_worker(
        &address,
        "m",
        Client::for_worker("127.0.0.1", timeouts),
        timeouts,
    );
    let (mut progress, mut text) = (Vec::new(), String::new());
    let answer = endpoint
        .chat_streamed(serde_json::json!([]), &serde_json::json!({}), &mut |s| {
            match s {
                crate::openai::Streamed::Progress(p) => progress.push(p.to_string()),
                crate::openai::Streamed::Text(t) => text.push_str(t),
            }
            true
        })
        .unwrap();
    assert_eq!(
        (answer.text.as_str(), answer.input(), answer.output()),
        ("hi", 5, 1)
    );
    assert_eq!(text, "hi");
    assert!(progress.len() >= 4, "{progress:?}");
    assert_eq!(progress[0], "queued: 1 running, 3 waiting");
}
