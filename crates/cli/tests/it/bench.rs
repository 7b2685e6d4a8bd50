//! `glassbox bench` against a real `glassbox serve`: the counts add up and
//! every admitted request has a trace.

use serde_json::Value;

use crate::serve::{free_port, serve};
use crate::support::{glassbox, stderr, stdout};

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

#[test]
fn bench_chat_streams_open_loop_and_counts_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let args = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "chat",
            "--url",
            &server.url,
            "--model",
            "moderation",
            "-q",
            "What is the price of Pro?",
            "--requests",
            "6",
            "--format",
            "json",
        ];
        a.extend_from_slice(extra);
        glassbox(&a, None)
    };
    let o = args(&["--rate", "30", "--seed", "3", "--slo-ms", "60000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rep: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rep["mode"], "open");
    assert_eq!(rep["completed"], 6, "{rep:#}");
    assert_eq!(rep["errors"].as_object().unwrap().len(), 0, "{rep:#}");
    assert_eq!(rep["window_s"], 0.2, "6 requests offered at 30/s");
    assert_eq!(rep["goodput"][0]["attainment"], 1.0, "{rep:#}");
    assert_eq!(rep["goodput"][0]["rps"], 30.0, "{rep:#}");
    assert_eq!(rep["ttft_ms"]["count"], 6, "every stream carried content");
    assert!(rep["ttft_ms"]["p50"].as_f64().unwrap() <= rep["e2e_ms"]["p50"].as_f64().unwrap());
    // Closed loop against a model nobody serves: every request fails, by status.
    let o = glassbox(
        &[
            "bench",
            "chat",
            "--url",
            &server.url,
            "--model",
            "nope",
            "-n",
            "2",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rep: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rep["mode"], "closed");
    assert_eq!(rep["completed"], 0);
    assert_eq!(rep["errors"]["http 404"], 2, "{rep:#}");
}
