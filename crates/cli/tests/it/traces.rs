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
