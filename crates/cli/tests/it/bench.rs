//! `glassbox bench` against a real `glassbox serve`: the counts add up and
//! every admitted request has a trace.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{glassbox, root, stderr, stdout};

/// A `glassbox serve` child, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `glassbox serve` on `dir/topologies` with a store in `dir`, and
/// waits until it accepts connections.
fn serve(dir: &Path) -> Server {
    let topologies = dir.join("topologies");
    std::fs::create_dir_all(&topologies).unwrap();
    std::fs::copy(
        root().join("examples/moderation.yaml"),
        topologies.join("moderation.yaml"),
    )
    .unwrap();
    let port = free_port();
    let store = format!("sqlite://{}", dir.join("traces.db").display());
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .args(["serve", "--topologies"])
        .arg(&topologies)
        .args(["--port", &port.to_string(), "--store", &store])
        .env("NO_COLOR", "1")
        .env_remove("GLASSBOX_API_KEY")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    // A generous bound on start-up (debug build, busy machine), not a timing
    // assertion.
    let until = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!(
                "glassbox serve exited with {status}: {}",
                std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
            );
        }
        assert!(Instant::now() < until, "glassbox serve did not start");
        thread::sleep(Duration::from_millis(100));
    }
    server
}

fn sum(v: &Value) -> u64 {
    v.as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum()
}

#[test]
fn bench_counts_add_up_and_every_admitted_request_has_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let inputs = dir.path().join("inputs.txt");
    let long = "a longer question about what the price of the plan is ".repeat(3);
    std::fs::write(
        &inputs,
        format!("What is the price of Pro?\nhello\n{{\"question\": \"{long}\"}}\n"),
    )
    .unwrap();
    let o = glassbox(
        &[
            "bench",
            "--url",
            &server.url,
            "--topology",
            "moderation",
            "--inputs",
            inputs.to_str().unwrap(),
            "--requests",
            "50",
            "--concurrency",
            "4",
            "--format",
            "json",
            "--verify-traces",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rep: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let c = &rep["counts"];
    assert_eq!(rep["mode"], "closed");
    assert_eq!(c["offered"], 50, "{rep:#}");
    assert_eq!(c["sent"], 50);
    assert_eq!(c["not_sent"], 0);
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(
        n("ok")
            + n("run_failed")
            + n("rejected")
            + sum(&c["http_errors"])
            + sum(&c["transport_errors"]),
        50,
        "{rep:#}"
    );
    // Four clients stay within any sensible concurrency bound: all admitted.
    assert_eq!(n("ok"), 50, "{rep:#}");
    assert_eq!(rep["latency_ms"]["count"], 50);
    assert!(rep["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    // Buckets: two short inputs in `<64`, one of 165 characters in `64–255`.
    let buckets = rep["by_input_length"].as_array().unwrap();
    assert_eq!(buckets.len(), 4);
    let offered: Vec<u64> = buckets
        .iter()
        .map(|b| b["counts"]["offered"].as_u64().unwrap())
        .collect();
    assert_eq!(offered.iter().sum::<u64>(), 50);
    assert_eq!(offered[2..], [0, 0]);
    assert!(offered[0] > 0 && offered[1] > 0, "{offered:?}");
    let t = &rep["traces"];
    assert_eq!(t["checked"], 50, "{rep:#}");
    assert_eq!(t["found"], 50);
    assert_eq!(t["missing"], 0);
    assert_eq!(t["without_id"], 0);
}

#[test]
fn bench_against_nothing_exits_69() {
    let port = free_port();
    let o = glassbox(
        &[
            "bench",
            "--url",
            &format!("http://127.0.0.1:{port}"),
            "--topology",
            "moderation",
            "-q",
            "hi",
            "--requests",
            "1",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot reach the server"),
        "{}",
        stderr(&o)
    );
}
