//! Critical path on `/v1/traces/{id}`; drift alerts on `/v1/alerts` and
//! `/metrics`, from synthetic traffic written under the running server; the
//! `[alerts]` config section.

use std::sync::Arc;

use glassbox_server::Config;
use glassbox_store::row::encode;
use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{RedactOptions, Redactor, SqliteStore, TraceStore};

use crate::support::{MODERATION, TestServer};

const HOUR: u64 = 3_600_000_000;

fn server() -> TestServer {
    TestServer::start(&[("moderation.yaml", MODERATION)], Config::default())
}

/// 400 `rag-chat` requests over the day before the last hour (75% through
/// retrieval), then 150 in the last hour, `current_retrieval` of every 20
/// through retrieval.
fn traffic(store: &std::path::Path, current_retrieval: u64) {
    let mut db = SqliteStore::open(store).unwrap();
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let now = glassbox_trace::unix_micros_now();
    let window = now - HOUR;
    let (mut reqs, mut spans) = (Vec::new(), Vec::new());
    let mut add = |seed: u64, at: u64, retrieval: bool| {
        let mut r = SynthRequest::new(seed, at);
        r.retrieval = retrieval;
        let (record, s) = build(&r);
        let s: Vec<_> = s.into_iter().map(Arc::new).collect();
        let (row, rows) = encode(&record, &s, &red);
        reqs.push(row);
        spans.extend(rows);
    };
    // A minute clear of each window's edges: the server's clock reads later.
    let minute = HOUR / 60;
    for i in 0..400u64 {
        add(
            10_000 + i,
            window - 24 * HOUR + minute + i * (23 * HOUR / 400),
            i % 4 != 0,
        );
    }
    for i in 0..150u64 {
        add(
            20_000 + i,
            window + minute + i * (HOUR / 200),
            i % 20 < current_retrieval,
        );
    }
    db.write(&reqs, &spans).unwrap();
}

#[test]
fn trace_detail_carries_the_critical_path() {
    let s = server();
    let r = s.post(
        "/v1/topologies/moderation/runs",
        None,
        r#"{"question": "What is the price of Pro?"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.header("x-request-id").unwrap().to_string();
    let t = s.get(&format!("/v1/traces/{id}"), None).json();
    let steps: Vec<&str> = t["critical_path"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["route", "pricing_answer", "check"]);
    let added: u64 = t["critical_path"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["added_us"].as_u64().unwrap())
        .sum();
    assert_eq!(added, t["critical_path"]["end_us"].as_u64().unwrap());
    // The request record keeps the whole input's length.
    assert_eq!(
        t["request"]["input_chars"],
        r#"{"question":"What is the price of Pro?"}"#.chars().count()
    );
}

#[test]
fn a_route_shift_is_listed_with_evidence_and_exported_as_a_metric() {
    let s = server();
    // Retrieval drops from 75% to 10% of requests.
    traffic(&s.store, 2);
    let ev = s.get("/v1/alerts?fresh=true", None).json();
    assert_eq!(
        (
            ev["baseline_requests"].as_u64(),
            ev["current_requests"].as_u64()
        ),
        (Some(400), Some(150)),
        "{ev}"
    );
    let alerts = ev["alerts"].as_array().unwrap();
    let direct = alerts
        .iter()
        .find(|a| a["kind"] == "route_shift" && a["node"] == "route>prompt>llm>validate")
        .unwrap_or_else(|| panic!("no route shift to the direct path: {ev}"));
    assert_eq!(direct["baseline"]["samples"], 400);
    assert_eq!(direct["current"]["samples"], 150);
    assert_eq!(direct["baseline"]["value"], 0.25);
    // 16 of the 150 went through retrieval (i % 20 < 2).
    assert_eq!(direct["current"]["value"].as_f64(), Some(134.0 / 150.0));
    assert!(
        direct["test"].as_str().unwrap().contains("z-test"),
        "{direct}"
    );
    assert!(alerts.iter().all(|a| a["kind"] == "route_shift"), "{ev}");
    let metrics = s.get("/metrics", None).text;
    let series = r#"glassbox_alerts_firing{kind="route_shift",topology="rag-chat",node="route>prompt>llm>validate"} 1"#;
    assert!(metrics.contains(series), "missing `{series}` in\n{metrics}");
    // Filtered by topology; the latest evaluation is answered without `fresh`.
    let other = s.get("/v1/alerts?topology=moderation", None).json();
    assert_eq!(other["alerts"].as_array().map(Vec::len), Some(0), "{other}");
    let again = s.get("/v1/alerts", None).json();
    assert_eq!(again["alerts"], ev["alerts"]);
    // The report says which nodes were on the critical path: the LLM on
    // every request, retrieval on the requests that took it.
    let rep = s.get("/v1/reports?topology=rag-chat", None).json();
    let crit = rep["groups"][0]["critical_path"].as_array().unwrap();
    let llm = crit.iter().find(|c| c["node"] == "llm").unwrap();
    assert_eq!(
        (llm["requests"].as_u64(), llm["rate"].as_f64()),
        (Some(550), Some(1.0))
    );
    let embed = crit.iter().find(|c| c["node"] == "embed").unwrap();
    assert_eq!(embed["requests"], 300 + 16);
}

#[test]
fn the_same_traffic_without_drift_fires_nothing() {
    let s = server();
    // 75% through retrieval in both windows.
    traffic(&s.store, 15);
    let ev = s.get("/v1/alerts?fresh=true", None).json();
    assert_eq!(ev["current_requests"], 150, "{ev}");
    assert_eq!(ev["alerts"].as_array().map(Vec::len), Some(0), "{ev}");
    let metrics = s.get("/metrics", None).text;
    assert!(
        metrics.contains("# TYPE glassbox_alerts_firing gauge"),
        "{metrics}"
    );
    assert!(!metrics.contains("glassbox_alerts_firing{"), "{metrics}");
}

#[test]
fn alert_settings_are_checked_field_by_field() {
    let config = Config::parse(
        "[alerts]\nwindow = \"soon\"\ninterval = \"30s\"\n\n[alerts.thresholds]\nalpha = 2.0\nroute_shift = 0.2\n",
    );
    let err = config.unwrap_err();
    assert!(
        err.contains("alerts: `window`: `soon` is not a length of time"),
        "{err}"
    );
    assert!(err.contains("alerts.thresholds: `alpha` is 2"), "{err}");
    let ok = Config::parse("[alerts]\nbaseline = \"7d\"\n[alerts.thresholds]\nmin_samples = 200\n")
        .unwrap();
    assert_eq!(ok.alerts.thresholds.min_samples, 200);
    assert_eq!(ok.alerts.window, "1h");
    let unknown = Config::parse("[alerts]\nwindw = \"1h\"\n").unwrap_err();
    assert!(unknown.contains("windw"), "{unknown}");
}
