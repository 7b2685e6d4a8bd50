//! `glassbox run` records into the trace store; `trace`, `explain` and
//! `report` read it back.

use serde_json::Value;

use crate::support::{glassbox, stdout};

fn store_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("traces.db").display())
}

fn run_json(store: &str, args: &[&str]) -> Value {
    let mut all = vec![
        "run",
        "examples/moderation.yaml",
        "--store",
        store,
        "--format",
        "json",
    ];
    all.extend_from_slice(args);
    let o = glassbox(&all, None);
    serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
}

fn ok(args: &[&str]) -> String {
    let o = glassbox(args, None);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

#[test]
fn runs_are_recorded_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_url(&dir);
    let pricing = run_json(&store, &["-q", "What is the price of Pro?"]);
    let abuse = run_json(&store, &["-q", "you idiot"]);
    let failed = run_json(&store, &["--input", r#"{"text": "no question"}"#]);
    assert_eq!(failed["status"], "failed");

    let listed: Value = serde_json::from_str(&ok(&[
        "trace", "list", "--store", &store, "--format", "json",
    ]))
    .unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["request_id"].as_str())
        .collect();
    for r in [&pricing, &abuse, &failed] {
        let id = r["request_id"].as_str().unwrap();
        assert!(ids.contains(&id), "{id} not in {ids:?}");
    }

    // The failed request left a complete trace with its status and error.
    let errors: Value = serde_json::from_str(&ok(&[
        "trace", "list", "--store", &store, "--status", "failed", "--format", "json",
    ]))
    .unwrap();
    assert_eq!(errors.as_array().unwrap().len(), 1, "{errors}");
    assert_eq!(errors[0]["request_id"], failed["request_id"]);

    let id = pricing["request_id"].as_str().unwrap();
    let shown = ok(&["trace", "show", id, "--store", &store]);
    for needle in [
        "waterfall",
        "route",
        "pricing_answer",
        "total",
        "explanation",
        "critical path",
        "route → pricing_answer → check",
    ] {
        assert!(shown.contains(needle), "missing {needle}:\n{shown}");
    }
    let en = ok(&["explain", id, "--store", &store]);
    assert!(en.contains("pricing"), "{en}");
    let zh = ok(&["explain", id, "--store", &store, "--lang", "zh"]);
    assert!(zh.contains("问题被归类为"), "{zh}");

    let report: Value =
        serde_json::from_str(&ok(&["report", "--store", &store, "--format", "json"])).unwrap();
    let text = report.to_string();
    assert!(text.contains("moderation"), "{text}");
    let csv = ok(&["report", "--store", &store, "--format", "csv"]);
    assert!(csv.lines().count() >= 2, "{csv}");
}

/// 400 baseline requests over the day before the last hour (75% through
/// retrieval) and 150 in the last hour, `retrieval` of every 20 through it.
fn drift_store(dir: &tempfile::TempDir, retrieval: u64) -> String {
    use glassbox_store::row::encode;
    use glassbox_store::synth::{SynthRequest, build};
    use glassbox_store::{RedactOptions, Redactor, SqliteStore, TraceStore};
    const HOUR: u64 = 3_600_000_000;
    let mut db = SqliteStore::open(&dir.path().join("traces.db")).unwrap();
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let window = glassbox_trace::unix_micros_now() - HOUR;
    let minute = HOUR / 60;
    let (mut reqs, mut spans) = (Vec::new(), Vec::new());
    let times = (0..400u64)
        .map(|i| (window - 23 * HOUR + i * (22 * HOUR / 400), i % 4 != 0))
        .chain((0..150u64).map(|i| (window + minute + i * (HOUR / 200), i % 20 < retrieval)));
    for (n, (at, through)) in times.enumerate() {
        let mut r = SynthRequest::new(n as u64 + 1, at);
        r.retrieval = through;
        let (record, s) = build(&r);
        let s: Vec<_> = s.into_iter().map(std::sync::Arc::new).collect();
        let (row, rows) = encode(&record, &s, &red);
        reqs.push(row);
        spans.extend(rows);
    }
    db.write(&reqs, &spans).unwrap();
    store_url(dir)
}

#[test]
fn alerts_list_drift_with_evidence_and_nothing_without() {
    let dir = tempfile::tempdir().unwrap();
    let store = drift_store(&dir, 2);
    let ev: Value =
        serde_json::from_str(&ok(&["alerts", "--store", &store, "--format", "json"])).unwrap();
    let alerts = ev["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 2, "{ev}");
    assert!(alerts.iter().all(|a| a["kind"] == "route_shift"), "{ev}");
    assert_eq!(alerts[0]["baseline"]["samples"], 400);
    let table = ok(&["alerts", "--store", &store]);
    assert!(table.contains("2 alert(s) firing"), "{table}");
    assert!(table.contains("route_shift"), "{table}");
    let check = glassbox(&["alerts", "--store", &store, "--check"], None);
    assert_eq!(check.status.code(), Some(1));
    // A route shift smaller than the threshold given does not fire.
    let loose = ok(&["alerts", "--store", &store, "--route-shift", "0.9"]);
    assert!(loose.contains("no alerts firing"), "{loose}");
    let bad = glassbox(&["alerts", "--store", &store, "--alpha", "2"], None);
    assert_eq!(bad.status.code(), Some(78));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("`alpha` is 2"), "{err}");
    let bad = glassbox(&["alerts", "--store", &store, "--window", "soon"], None);
    assert_eq!(bad.status.code(), Some(78));

    let calm = tempfile::tempdir().unwrap();
    let store = drift_store(&calm, 15);
    let text = ok(&["alerts", "--store", &store, "--check"]);
    assert!(text.contains("no alerts firing"), "{text}");
}

#[test]
fn no_store_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = glassbox(
        &[
            "run",
            "examples/moderation.yaml",
            "-q",
            "hello",
            "--no-store",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    // The default store lives under XDG_DATA_HOME, which the tests point at a
    // private directory; `--no-store` must not have created it.
    let list = ok(&[
        "trace",
        "list",
        "--store",
        &store_url(&dir),
        "--format",
        "json",
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap(),
        Value::Array(vec![])
    );
}

#[test]
fn an_unusable_store_url_is_a_clear_error() {
    let o = glassbox(
        &[
            "run",
            "examples/moderation.yaml",
            "-q",
            "hello",
            "--store",
            "mysql://nope",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(78));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown scheme"), "{err}");
}
