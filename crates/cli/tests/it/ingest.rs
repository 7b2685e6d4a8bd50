//! Traces ingested over OTLP by a real `glassbox serve` (issue #35).
//!
//! - Ack-after-commit, including spans held for a root still to come:
//!   kill -9 the server while it holds acknowledged spans, start it again
//!   on the same store, and every acknowledged span ends up in the store,
//!   in its whole trace when the root comes after the restart, as a
//!   partial trace when it never comes.
//! - `glassbox plan pipeline --discovered` sizes a pipeline known only
//!   from its ingested traces.

use std::time::{Duration, Instant};

use glassbox_store::{StoreUrl, TraceStore};
use glassbox_trace::RequestId;

use crate::serve::{agent, serve_on};

const T0_MS: u64 = 1_764_000_000_000;

fn trace_hex(t: u32) -> String {
    format!("{:024x}{t:08x}", 0x7e57u64)
}

/// One OTLP/JSON span of trace `t`, a chain step.
fn span(t: u32, id: u8, parent: Option<u8>, name: &str, ms: (u64, u64)) -> String {
    let chain = r#"{"key":"openinference.span.kind","value":{"stringValue":"CHAIN"}}"#;
    span_with(t, id, parent, name, ms, chain)
}

/// One OTLP/JSON span of trace `t` with attributes `attrs` (JSON).
fn span_with(
    t: u32,
    id: u8,
    parent: Option<u8>,
    name: &str,
    ms: (u64, u64),
    attrs: &str,
) -> String {
    let parent = parent.map_or(String::new(), |p| format!(r#""parentSpanId":"{p:016x}","#));
    format!(
        r#"{{"traceId":"{}","spanId":"{id:016x}",{parent}"name":"{name}","startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{attrs}]}}"#,
        trace_hex(t),
        (T0_MS + ms.0) * 1_000_000,
        (T0_MS + ms.1) * 1_000_000,
    )
}

fn export(spans: &[String]) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"held-app"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

/// The children of trace `t` (exported first, as SDKs do) and its root.
fn pieces(t: u32) -> (String, String) {
    let children = export(&[
        span(t, 2, Some(1), "retrieve", (10, 100)),
        span(t, 3, Some(1), "generate", (110, 400)),
    ]);
    let root = export(&[span(t, 1, None, "answer", (0, 500))]);
    (children, root)
}

fn post(url: &str, body: &str) -> u16 {
    agent()
        .post(format!("{url}/v1/traces"))
        .content_type("application/json")
        .send(body)
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

fn spans_of(store: &mut dyn TraceStore, t: u32) -> Option<usize> {
    let id: RequestId = trace_hex(t).parse().unwrap();
    store.get(id).unwrap().map(|s| s.spans.len())
}

#[test]
fn kill_9_with_held_spans_loses_no_acknowledged_span() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traces.db");
    let store = format!("sqlite://{}", db.display());
    let config = dir.path().join("glassbox.toml");
    std::fs::write(&config, "[ingest]\nhold_secs = 2\n").unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let mut server = serve_on(dir.path(), &[], &store, &args);
    // Traces 1..=20: children acknowledged (held); roots of 1..=10 too.
    for t in 1..=20 {
        let (children, _) = pieces(t);
        assert_eq!(post(&server.url, &children), 200);
    }
    for t in 1..=10 {
        let (_, root) = pieces(t);
        assert_eq!(post(&server.url, &root), 200);
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // Traces 11..=20 were only held when the process died.
    let mut s = glassbox_store::open_store(&StoreUrl::parse(&store).unwrap()).unwrap();
    for t in 1..=10 {
        assert_eq!(spans_of(&mut *s, t), Some(3), "trace {t}");
    }
    for t in 11..=20 {
        assert_eq!(spans_of(&mut *s, t), None, "trace {t}");
    }
    drop(s);

    let server = serve_on(dir.path(), &[], &store, &args);
    // Roots of 11..=15 arrive after the restart: whole traces.
    for t in 11..=15 {
        let (_, root) = pieces(t);
        assert_eq!(post(&server.url, &root), 200);
    }
    let mut s = glassbox_store::open_store(&StoreUrl::parse(&store).unwrap()).unwrap();
    for t in 11..=15 {
        assert_eq!(spans_of(&mut *s, t), Some(3), "trace {t} after the restart");
    }
    // Roots of 16..=20 never come: stored as they are once the hold ends
    // (a generous bound for a busy machine, not a timing assertion).
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let got: Vec<Option<usize>> = (16..=20).map(|t| spans_of(&mut *s, t)).collect();
        if got.iter().all(|g| *g == Some(2)) {
            break;
        }
        assert!(Instant::now() < until, "held traces not stored: {got:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Everything held is in the store, so the log is empty again.
    let held = dir.path().join("traces.db.ingest-held");
    let until = Instant::now() + Duration::from_secs(60);
    let segments = || {
        std::fs::read_dir(&held)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "held")
            })
            .count()
    };
    while segments() > 0 {
        assert!(Instant::now() < until, "the held-span log was not retired");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(server);
}

#[test]
fn plan_pipeline_sizes_a_discovered_topology_from_its_ingested_traces() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("traces.db").display());
    let server = serve_on(dir.path(), &[], &store, &[]);
    let llm = r#"{"key":"openinference.span.kind","value":{"stringValue":"LLM"}},{"key":"llm.model_name","value":{"stringValue":"llama-3.1-8b"}},{"key":"llm.token_count.prompt","value":{"intValue":"500"}},{"key":"llm.token_count.completion","value":{"intValue":"200"}}"#;
    let retriever = r#"{"key":"openinference.span.kind","value":{"stringValue":"RETRIEVER"}}"#;
    let mut spans = Vec::new();
    for t in 100..110 {
        spans.push(span(t, 1, None, "answer", (0, 500)));
        // Half the requests retrieve first.
        if t % 2 == 0 {
            spans.push(span_with(t, 2, Some(1), "retrieve", (5, 50), retriever));
        }
        spans.push(span_with(t, 3, Some(1), "generate", (60, 460), llm));
    }
    assert_eq!(post(&server.url, &export(&spans)), 200);
    drop(server);
    let out = crate::support::glassbox(
        &[
            "plan",
            "pipeline",
            "--discovered",
            "held-app/answer",
            "--store",
            &store,
            "--rate",
            "10",
            "--format",
            "json",
        ],
        None,
    );
    let err = crate::support::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&crate::support::stdout(&out)).unwrap();
    let profile = &v["profile"];
    assert_eq!(profile["topology"], "held-app/answer");
    assert_eq!(profile["requests"], 10);
    let nodes: Vec<(&str, &str, f64)> = profile["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap(),
                n["kind"].as_str().unwrap(),
                n["reach"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("answer", "chain", 1.0),
            ("retrieve", "retriever", 0.5),
            ("generate", "llm_inference", 1.0)
        ]
    );
    let generate = &profile["nodes"][2];
    assert_eq!(generate["resource"], "gpu");
    assert_eq!(generate["model"], "llama-3.1-8b");
    assert_eq!(generate["input_tokens_per_call"], 500.0);
    assert!(
        v["plan"]["gpus"]["llama-3.1-8b @ h100-sxm"]
            .as_u64()
            .unwrap()
            >= 1,
        "{v}"
    );
    // A topology the store never saw is named.
    let missing = crate::support::glassbox(
        &[
            "plan",
            "pipeline",
            "--discovered",
            "nope/x",
            "--store",
            &store,
            "--rate",
            "1",
        ],
        None,
    );
    assert_eq!(missing.status.code(), Some(78));
    assert!(crate::support::stderr(&missing).contains("no stored requests of topology `nope/x`"));
}
