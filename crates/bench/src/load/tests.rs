//! The load against a small real HTTP server in the test (std sockets,
//! keep-alive): what the counts, the request ids and the trace check make
//! of its answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::stats::Buckets;

/// A test server: every third run is refused with 429, the others answer
/// 200 with a request id; traces exist for even-numbered ids only.
struct TestServer {
    url: String,
    runs: Arc<AtomicU64>,
}

fn answer(path: &str, method: &str, runs: &AtomicU64) -> (u16, String) {
    match (method, path) {
        ("GET", "/healthz") => (200, "ok".into()),
        ("POST", p) if p.ends_with("/runs") => {
            let n = runs.fetch_add(1, Ordering::Relaxed);
            if n % 3 == 2 {
                (429, r#"{"error":{"code":"busy"}}"#.into())
            } else {
                (200, format!(r#"{{"request_id":"r{n}","status":"ok"}}"#))
            }
        }
        ("GET", p) if p.starts_with("/v1/traces/r") => {
            let n: u64 = p["/v1/traces/r".len()..].parse().unwrap_or(1);
            if n.is_multiple_of(2) {
                (200, "{}".into())
            } else {
                (404, "{}".into())
            }
        }
        _ => (404, "{}".into()),
    }
}

fn serve_connection(stream: TcpStream, runs: &AtomicU64) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (status, text) = answer(&path, &method, runs);
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(text.as_bytes()).is_err()
        {
            return;
        }
    }
}

fn test_server() -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let runs = Arc::new(AtomicU64::new(0));
    let counter = runs.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let runs = counter.clone();
            std::thread::spawn(move || serve_connection(stream, &runs));
        }
    });
    TestServer { url, runs }
}

fn config(url: &str, load: Load, stop: Stop) -> Config {
    let buckets = Buckets::new(vec![10]).unwrap();
    let inputs = vec![
        input(&serde_json::json!({"question": "short"}), &buckets),
        input(
            &serde_json::json!({"question": "a longer question"}),
            &buckets,
        ),
    ];
    Config {
        url: url.to_string(),
        topology: "moderation".into(),
        api_key: None,
        inputs,
        buckets,
        load,
        stop,
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(10),
        verify_traces: true,
    }
}

#[test]
fn a_closed_loop_counts_every_answer_and_checks_every_admitted_trace() {
    let server = test_server();
    let bench = Bench::connect(config(
        &server.url,
        Load::Closed { clients: 3 },
        Stop::Count(30),
    ))
    .unwrap();
    let progress = AtomicU64::new(0);
    let report = bench.run(&progress);
    let c = &report.summary.counts;
    // Three clients each stop on their first look past the count.
    assert_eq!((c.offered, c.sent, c.not_sent), (30, 30, 0), "{c:?}");
    assert_eq!(c.ok + c.rejected, 30, "{c:?}");
    assert_eq!(c.rejected, 10, "every third run is refused: {c:?}");
    assert_eq!(progress.load(Ordering::Relaxed), 30);
    assert_eq!(server.runs.load(Ordering::Relaxed), 30);
    assert_eq!(report.mode, "closed");
    assert_eq!(report.concurrency, Some(3));
    // Both input buckets were used, in turn.
    let offered: Vec<u64> = report
        .summary
        .by_input_length
        .iter()
        .map(|b| b.counts.offered)
        .collect();
    assert_eq!(offered, [15, 15]);
    // The 20 admitted ids are looked up; the odd ones have no trace.
    let t = report.traces.as_ref().unwrap();
    assert_eq!((t.checked, t.without_id), (20, 0), "{t:?}");
    assert_eq!(t.found + t.missing, 20, "{t:?}");
    assert!(t.missing > 0 && t.missing_ids.len() <= 10, "{t:?}");
    assert!(report.traces_incomplete());
    assert!(!report.unanswered());
}

#[test]
fn an_open_loop_offers_its_count_at_the_rate_given() {
    let server = test_server();
    let open = OpenLoop {
        rate: 200.0,
        arrivals: Arrivals::Fixed,
        senders: 4,
        seed: 1,
    };
    let mut cfg = config(&server.url, Load::Open(open), Stop::Count(20));
    cfg.verify_traces = false;
    let report = Bench::connect(cfg).unwrap().run(&AtomicU64::new(0));
    let c = &report.summary.counts;
    assert_eq!(c.offered, 20, "{c:?}");
    assert_eq!(c.sent + c.not_sent, 20);
    assert_eq!(report.mode, "open");
    assert_eq!(
        (report.rate, report.arrivals, report.max_in_flight),
        (Some(200.0), Some(Arrivals::Fixed), Some(4))
    );
    assert!(report.traces.is_none() && !report.traces_incomplete());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["arrivals"], "fixed");
    assert_eq!(json["counts"]["offered"], 20);
}

#[test]
fn nothing_listening_is_unavailable_before_any_load() {
    // A port that was just free: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let err = Bench::connect(config(&url, Load::Closed { clients: 1 }, Stop::Count(1)))
        .err()
        .unwrap();
    assert!(matches!(err, BenchError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("cannot reach the server"), "{err}");
}
